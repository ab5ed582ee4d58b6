"""The oracle: what a correct kernel must have written, and how far off a run is.

``judge(run, A, B, exact=...)`` returns a Judgement (findings, worst ratio,
error map, message); ``assert_judgement`` records it and fails the test with
everything needed to act on it. Checks go in this order, each on the
elements the previous ones left: shape, unwritten elements (poison bits),
NaN/Inf positions, then values; last, what the launch changed outside C (guard bands, A, B).

One module per job, each name importable from here:

- exactness: exact judging's reference and its premise (InexactProblem, exact_reference,
  exactness_violation)
- bound: bounded judging's forward error bound (Bound, gamma, roundings, bound_ratio, within_bound)
- special_values: the IEEE NaN/Inf pattern a product must show (special_pattern)
- outside: what a launch changed outside C (out_of_bounds_write, input_mutation)
- judging: one run compared with the reference (judge, reference_of, UnchangedElements)
- judgement: the Judgement and its failure message (Judgement, current_test, reproduction)
- recording: recording a Judgement and failing the test (assert_judgement)
"""

from gemmcheck.judge.oracle.bound import U64, Bound, bound_ratio, gamma, output_roundoff, roundings, within_bound
from gemmcheck.judge.oracle.exactness import InexactProblem, exact_reference, exactness_violation
from gemmcheck.judge.oracle.judgement import WORST_ROWS, Judgement, current_test, reproduction
from gemmcheck.judge.oracle.judging import UnchangedElements, judge, reference_of
from gemmcheck.judge.oracle.recording import assert_judgement
from gemmcheck.judge.oracle.special_values import special_pattern

__all__ = [
    "U64", "WORST_ROWS", "Bound", "InexactProblem", "Judgement", "UnchangedElements", "assert_judgement",
    "bound_ratio", "current_test", "exact_reference", "exactness_violation", "gamma", "judge",
    "output_roundoff", "reference_of", "reproduction", "roundings", "special_pattern", "within_bound",
]
