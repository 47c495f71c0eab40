"""Does calibration make the estimate of a call closer to what the provider counted?

Replays the real usage a Pi session recorded: for every assistant message with usage (the
pi-mono session holds 452 Anthropic calls with cache reads and writes), the estimate is the
`chars-v2` size of the context Pi sent for it (the branch up to the entry it answers, its
parent, as `build_session_context` rebuilds it) plus `--fixed-tokens`, and the actual input is
input + cacheRead + cacheWrite of its usage. Calibration runs online, in file order, with the
default settings (`ds4_core.calibration.calibrate` over the samples seen so far, newest first),
exactly as `ds4/usage` reports would feed it.

Printed, beside the uncalibrated estimate of the same calls (ratio 1.0, the baseline):
- the absolute percentage error of estimate x ratio against the actual count (median, p90);
- how often the estimate is more than 10% under the actual count (a plan that believes it fits
  and overflows the window): the risk calibration exists to remove;
- the applied ratio at the end and the drift warnings raised.

Material no one on the team wrote: the session is `badlogic/pi-mono`'s test fixture (MIT).

    .venv/bin/python bench/calibration_eval.py [--session FILE] [--fixed-tokens N]
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from ds4_core.calibration import CalibrationSettings, Sample, calibrate
from ds4_core.sessions import build_session_context, read_all
from ds4_core.tokens import ESTIMATOR_VERSION, estimate_message_tokens

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_SESSION = ROOT / "examples" / "pi-mono-v1-large-session.jsonl"


def calls(session: Path, fixed_tokens: int) -> list[tuple[str, str, int, int, int]]:
    """(provider, model, estimated, actual, cache_read) of each assistant call with usage."""
    entries = read_all(session).entries
    found = []
    for entry in entries:
        message = entry.data.get("message") if entry.entry_type == "message" else None
        parent = entry.parent_id
        if isinstance(message, dict) and message.get("role") == "assistant" and parent:
            usage = message.get("usage") or {}
            actual = sum(int(usage.get(k) or 0) for k in ("input", "cacheRead", "cacheWrite"))
            if actual > 0 and message.get("stopReason") not in ("error", "aborted"):
                context = build_session_context(entries, parent)
                estimated = fixed_tokens + sum(estimate_message_tokens(m) for m in context.messages)
                found.append(
                    (
                        str(message.get("provider")),
                        str(message.get("model")),
                        estimated,
                        actual,
                        int(usage.get("cacheRead") or 0),
                    )
                )
    return found


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--session", type=Path, default=DEFAULT_SESSION)
    parser.add_argument("--fixed-tokens", type=int, default=0)
    args = parser.parse_args()
    settings = CalibrationSettings()
    seen: dict[tuple[str, str], list[Sample]] = {}
    plain, calibrated, under_plain, under_calibrated = [], [], 0, 0
    ratios: dict[tuple[str, str], float] = {}
    warnings: set[str] = set()
    replayed = calls(args.session, args.fixed_tokens)
    for provider, model, estimated, actual, cache_read in replayed:
        profile = (provider, model)
        history = seen.setdefault(profile, [])
        state = calibrate(provider, model, ESTIMATOR_VERSION, history, settings)
        predicted = estimated * max(state.ratio, 0.0)
        plain.append(abs(estimated - actual) / actual * 100)
        calibrated.append(abs(predicted - actual) / actual * 100)
        under_plain += estimated < 0.9 * actual
        under_calibrated += predicted < 0.9 * actual
        history.insert(0, Sample(estimated, actual, actual - cache_read, cache_read, 0))
        after = calibrate(provider, model, ESTIMATOR_VERSION, history, settings)
        ratios[profile] = after.ratio
        warnings.update(f"{provider}/{model}: {w.code} ({w.severity})" for w in after.warnings)
    n = len(replayed)
    print(f"session {args.session.name}: {n} calls with usage, fixedTokens {args.fixed_tokens}")
    print(f"{'':32} {'median APE':>11} {'p90 APE':>9} {'>10% under':>11}")
    for name, errors, under in (
        ("estimate (baseline, ratio 1.0)", plain, under_plain),
        ("estimate x calibrated ratio", calibrated, under_calibrated),
    ):
        print(
            f"{name:32} {statistics.median(errors):10.1f}% {percentile(errors, 0.9):8.1f}% "
            f"{under:5d} ({under / n * 100:4.1f}%)"
        )
    for (provider, model), ratio in ratios.items():
        print(f"final ratio {provider}/{model}: {ratio}")
    print("warnings:", "; ".join(sorted(warnings)) or "none")


if __name__ == "__main__":
    main()
