"""The delay histogram gives the percentile's bin edge that the samples give."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from aiko.firmware_interface.delays import DelayHistogram


@settings(max_examples=200, derandomize=True)
@given(st.lists(st.floats(-0.01, 0.2, allow_nan=False), min_size=1, max_size=300),
       st.sampled_from([1, 50, 90, 99, 100]))
def test_percentile_is_the_upper_edge_of_the_samples_bin(delays, q):
    h = DelayHistogram(0.0005, 100)          # 50 ms; longer ones in the last bin
    for d in delays:
        h.add(d)
    bins = np.minimum(np.floor(np.maximum(delays, 0.0) / 0.0005), 99).astype(int)
    k = np.sort(bins)[max(int(np.ceil(q / 100 * len(delays))) - 1, 0)]
    assert h.percentile(q) == min(0.0005 * (k + 1), max(0.0, max(delays)))
    assert h.max == max(0.0, max(delays))
    assert h.count == len(delays)


def test_no_delay_no_percentile():
    h = DelayHistogram(0.001, 10)
    assert h.percentile(50) is None and h.count == 0
