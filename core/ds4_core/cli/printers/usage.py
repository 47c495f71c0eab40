"""`ds4 usage` and the calibration lines of `ds4 health`: a provider's usage of a planned call
and each profile's calibration (docs/model-awareness.md), in words."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TextIO

from ...quoting import terminal_text
from ...results import UsageResult
from ..layout import fmt


def share_text(share: Any) -> str:
    """A cache share (0..1) as a percentage; `n/a` for None (no input counted yet)."""
    return f"{share * 100:.1f}%" if isinstance(share, int | float) else "n/a"


def calibration_text(profile: Mapping[str, Any]) -> str:
    """One profile's calibration in one line: `provider/model ratio R (calibrated|N of M
    samples), cache share S; warnings`."""
    name = terminal_text(f"{profile.get('provider')}/{profile.get('model')}")
    accepted, samples = profile.get("accepted", 0), profile.get("samples", 0)
    minimum = profile.get("minimumSamples")
    needed = f" of the {minimum} needed" if isinstance(minimum, int) else ""
    state = (
        f"calibrated from {accepted} of {samples} samples"
        if profile.get("calibrated")
        else f"not calibrated yet: {accepted} accepted{needed}, {samples} reported"
    )
    line = f"{name} ratio {profile.get('ratio')} ({state}), cache share "
    line += share_text(profile.get("cacheShare"))
    warnings = [f"{w.get('code')} ({w.get('severity')})" for w in profile.get("warnings", ()) or ()]
    return line + (f"; {', '.join(warnings)}" if warnings else "")


def print_usage(result: UsageResult, out: TextIO) -> None:
    """The `ds4 usage` report: the usage recorded on the manifest, whether it became a
    calibration sample (and why not), and the profile's calibration with its warnings."""
    estimated = result.estimated_tokens
    out.write(
        f"manifest {terminal_text(result.manifest_id)}: {fmt(result.actual_tokens)} input "
        f"tokens reported"
        + (
            f" (estimated {fmt(estimated)}, {result.actual_tokens / estimated:.3f}x)"
            if estimated
            else ""
        )
        + f", cache share {share_text(result.cache_share)}\n"
    )
    if result.sample:
        out.write("calibration sample: recorded\n")
    else:
        out.write(f"calibration sample: not recorded ({terminal_text(result.why_not or '')})\n")
    out.write(f"calibration: {calibration_text(result.calibration)}\n")
    for warning in result.calibration.get("warnings", ()) or ():
        out.write(f"  {warning.get('severity')}: {terminal_text(str(warning.get('message')))}\n")


def manifest_usage_lines(manifest: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The `ds4 manifest` lines of model awareness, as (label, text): the provider's count
    beside the estimate (or that none was reported), the calibration the budget used, and a
    model switch."""
    lines: list[tuple[str, str]] = []
    usage = manifest.get("usage")
    if isinstance(usage, Mapping):
        estimated = manifest.get("estimatedTokens")
        actual = manifest.get("actualTokens")
        ratio = (
            f", {actual / estimated:.3f}x the estimate"
            if isinstance(actual, int) and isinstance(estimated, int) and estimated > 0
            else ""
        )
        lines.append(
            (
                "actualTokens",
                f"{fmt(actual)} reported by {terminal_text(usage.get('provider'))}/"
                f"{terminal_text(usage.get('model'))}{ratio} (cache read "
                f"{fmt(usage.get('cacheRead'))}, write {fmt(usage.get('cacheWrite'))}, "
                f"share {share_text(usage.get('cacheShare'))}; output {fmt(usage.get('output'))}"
                + (
                    f"; stop {terminal_text(usage.get('stopReason'))}"
                    if usage.get("stopReason")
                    else ""
                )
                + ")",
            )
        )
    elif "usage" in manifest:
        lines.append(("actualTokens", "not reported yet (ds4/usage, `ds4 usage`)"))
    awareness = manifest.get("modelAwareness")
    if isinstance(awareness, Mapping):
        calibration = awareness.get("calibration")
        if isinstance(calibration, Mapping):
            lines.append(("calibration", calibration_text(calibration)))
        switch = awareness.get("modelSwitch")
        if isinstance(switch, Mapping):
            lines.append(
                (
                    "modelSwitch",
                    f"from {terminal_text(switch.get('from'))} to {terminal_text(switch.get('to'))}",
                )
            )
    return lines
