"""`releval power`: queries needed for a paired test, or the smallest difference n queries resolve.

Both answers use the exact power of the two-sided paired t-test (noncentral t); ``--sd`` is the
standard deviation of per-query differences between the two configurations, which a pilot
comparison or an earlier evaluation on the same kind of queries provides: `releval compare`
prints it (line 6, and ``power.sd`` in --json) with this command filled in for the observed
difference.
"""

from __future__ import annotations

import argparse

from releval.errors import InputError
from releval.measurement import stats


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--sd",
        type=float,
        required=True,
        help="standard deviation of per-query score differences (`releval compare` prints it)",
    )
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("--delta", type=float, help="mean difference to detect; prints the number of queries needed")
    target.add_argument("--n", type=int, help="number of queries; prints the smallest resolvable mean difference")
    parser.add_argument("--alpha", type=float, default=0.05, help="two-sided significance level (default 0.05)")
    parser.add_argument(
        "--power", type=float, default=0.8, help="probability of detecting the difference (default 0.8)"
    )


def power_answer(
    sd: float, delta: float | None = None, n: int | None = None, alpha: float = 0.05, power: float = 0.8
) -> str:
    """One sentence: the queries needed to detect ``delta``, or (given ``n``) the smallest mean
    difference ``n`` queries resolve, with the setting it assumes."""
    setting = f"sd {sd:g}, alpha {alpha:g}, power {power:g}, two-sided paired t-test"
    if delta is not None:
        needed = stats.queries_needed(sd, delta, alpha=alpha, power=power)
        return f"{needed} queries to detect a mean difference of {abs(delta):g} ({setting})"
    if n is None:
        raise InputError("give delta or n", field="delta")
    smallest = stats.minimum_detectable_difference(sd, n, alpha=alpha, power=power)
    return f"{smallest:.4g} is the smallest mean difference {n} queries resolve ({setting})"


def run(args: argparse.Namespace) -> int:
    print(power_answer(args.sd, delta=args.delta, n=args.n, alpha=args.alpha, power=args.power))
    return 0
