"""What a destination may see: the `privacy.*` settings resolved for one provider
(docs/reference.md §3.8, "Destination").

The destination of a plan is its model's provider. A provider whose id equals, ignoring case, an
id in `privacy.localProviders` is local and may see every level; any other provider is remote
and may see the levels `privacy.remoteProviders[provider]` lists (exact id, ignoring case), else
`privacy.remoteDefaultAllowed`. An unknown provider (none named, none in the session) is remote:
when in doubt, content is withheld. Secrets are redacted for remote destinations only, when
`privacy.redactSecrets` is on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from ..config import Config
from .levels import LEVELS, RANK, Level

DestinationClass = Literal["local", "remote"]


@dataclass(frozen=True, slots=True)
class Destination:
    """Where text goes: `provider` (as named; None when unknown), its `kind` and the levels it
    may see (`allowed`, lowest first); `redact` says whether secrets are redacted for it;
    `enabled` is False when privacy is off (then nothing is classified, withheld or
    redacted)."""

    provider: str | None
    kind: DestinationClass
    allowed: tuple[Level, ...]
    redact: bool
    enabled: bool = True
    default_level: Level = "normal"
    rule: str = "privacy.remoteDefaultAllowed"
    """The setting that decided `allowed` (`privacy.localProviders`,
    `privacy.remoteProviders.<provider>` or `privacy.remoteDefaultAllowed`)."""

    @property
    def withheld(self) -> tuple[Level, ...]:
        """The levels this destination may not see, lowest first (none when privacy is off)."""
        if not self.enabled:
            return ()
        return tuple(level for level in LEVELS if level not in self.allowed)

    def allows(self, level: str) -> bool:
        """Whether content of `level` may reach this destination."""
        return not self.enabled or level in self.allowed

    def to_wire(self) -> dict[str, Any]:
        """`{provider, kind, allowed, redactSecrets}` as in manifests and plan results (with
        privacy off: every level allowed, nothing redacted)."""
        return {
            "provider": self.provider,
            "kind": self.kind,
            "allowed": list(self.allowed) if self.enabled else list(LEVELS),
            "redactSecrets": self.redact and self.enabled,
        }


def destination(config: Config, provider: str | None) -> Destination:
    """Resolve `provider` (a model's provider id, or None when unknown) under `config`'s
    privacy settings. Never raises: the settings were validated when `config` was built."""
    settings = config.privacy
    name = provider.strip() if isinstance(provider, str) and provider.strip() else None
    folded = name.casefold() if name else None
    if folded is not None and folded in {p.casefold() for p in settings.local_providers}:
        return Destination(
            name,
            "local",
            LEVELS,
            False,
            settings.enabled,
            settings.default_classification,
            "privacy.localProviders",
        )
    allowed: tuple[str, ...] = tuple(settings.remote_default_allowed)
    rule = "privacy.remoteDefaultAllowed"
    if folded is not None:
        for key, levels in settings.remote_providers.items():
            if key.casefold() == folded:
                allowed = tuple(levels)
                rule = f"privacy.remoteProviders.{key}"
                break
    if config.rejected_privacy:  # a setting meant to tighten may have been rejected: withhold
        allowed = tuple(level for level in allowed if level == "normal")
        rule = (
            "only normal: a privacy setting was rejected ("
            + ", ".join(sorted(config.rejected_privacy))
            + "; see the settings warnings)"
        )
    ordered = tuple(sorted({level for level in allowed if level in RANK}, key=RANK.__getitem__))
    return Destination(
        name,
        "remote",
        ordered,  # type: ignore[arg-type]
        settings.redact_secrets,
        settings.enabled,
        settings.default_classification,
        rule,
    )


def explain(target: Destination) -> str:
    """One paragraph telling a user what `target` may see (`ds4 privacy`, `ds4.privacy`)."""
    who = f"provider '{target.provider}'" if target.provider else "an unnamed provider"
    if not target.enabled:
        return (
            f"Privacy is off (privacy.enabled is false): {who} receives everything the plan "
            "selects, markers and secrets included."
        )
    if target.kind == "local":
        return (
            f"{who} is local (listed in privacy.localProviders): it may see every level "
            "(normal, internal, sensitive, local-only). Markers are removed; secrets are "
            "not redacted."
        )
    seen = ", ".join(target.allowed) or "nothing"
    hidden = ", ".join(target.withheld) or "nothing"
    redaction = (
        "Secrets (private keys, provider keys, Bearer tokens, password and key assignments) "
        "are replaced by [DS4 REDACTED ...] placeholders."
        if target.redact
        else "Secrets are NOT redacted (privacy.redactSecrets is false)."
    )
    return (
        f"{who} is remote: it may see {seen} ({target.rule}). Content classified {hidden} is withheld: in "
        "conversation turns it becomes a '[DS4 <level> content excluded by privacy policy]' "
        "placeholder; retrieved history, project snippets and summaries that hold any of it "
        f"are left out whole. {redaction}"
    )


def policy_summary(config: Config) -> dict[str, Any]:
    """The active policy as `ds4.health` shows it: `{enabled, rejectedSettings,
    defaultClassification, localProviders, remoteDefaultAllowed, remoteProviders,
    redactSecrets}` (`rejectedSettings`: `privacy.*` keys whose value was rejected; remote
    providers then see `normal` only)."""
    settings = config.privacy
    return {
        "enabled": settings.enabled,
        "rejectedSettings": sorted(config.rejected_privacy),
        "defaultClassification": settings.default_classification,
        "localProviders": list(settings.local_providers),
        "remoteDefaultAllowed": list(settings.remote_default_allowed),
        "remoteProviders": {k: list(v) for k, v in settings.remote_providers.items()},
        "redactSecrets": settings.redact_secrets,
    }
