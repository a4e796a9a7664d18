"""The host-side decisions of the captured multi-GPU levels (bfs/gpu/level_graphs.py), which every rank must
take alike from the same gathered counters: which top-down graph runs a level, and which pairs its exact
second round moves.  The graphs themselves run on GPU machines (tests/test_multigpu.py)."""

import numpy as np

from breadth.bfs.gpu.level_graphs import CAPS, choose_top_down, resend_plan


def test_choose_top_down_cap_and_prefix():
    small, large = CAPS
    assert choose_top_down([1, 0], [small, 3], CAPS, 16384) == (small, False)
    assert choose_top_down([1, 0], [small + 1, 3], CAPS, 16384) == (large, False)  # one rank's sum decides
    assert choose_top_down([16384, 5], [10, 10], CAPS, 16384) == (small, False)
    assert choose_top_down([16385, 5], [10, 10**9], CAPS, 16384) == (large, True)


def test_resend_plan_one_rank_resends_nothing():
    assert resend_plan(np.array([[5, 70000, 0, 0]]), 0, 4096) is None


def test_resend_plan_two_ranks():
    # columns: claimed, degree sum, remote pairs (all for the other rank), spare
    cnt = np.array([[5, 50, 70, 0], [7, 60, 20, 0]])
    assert resend_plan(cnt, 0, 100) is None
    nsend, nrecv, starts = resend_plan(cnt, 0, 64)  # rank 0 made 70 > 64 pairs for rank 1
    assert nsend.tolist() == [0, 70] and nrecv.tolist() == [0, 0] and starts.tolist() == [0, 0]
    nsend, nrecv, starts = resend_plan(cnt, 1, 64)
    assert nsend.tolist() == [0, 0] and nrecv.tolist() == [70, 0]


def test_resend_plan_three_ranks_only_overflowed_pairs_move():
    # per-owner counts from column 4: row r = the pairs rank r made for ranks 0, 1, 2
    owners = np.array([[0, 10, 90], [80, 0, 5], [3, 4, 0]])
    cnt = np.concatenate([np.zeros((3, 2), np.int64), owners.sum(1, keepdims=True), np.zeros((3, 1), np.int64),
                          owners], axis=1)
    assert resend_plan(cnt, 0, 90) is None
    nsend, nrecv, starts = resend_plan(cnt, 0, 64)
    assert nsend.tolist() == [0, 0, 90]  # 90 > 64 for rank 2; the 10 for rank 1 went out whole
    assert nrecv.tolist() == [0, 80, 0]  # from rank 1, which overflowed rank 0 (indexed by sender)
    assert starts.tolist() == [0, 0, 10]  # rank 0's pairs grouped by owner: 0, then 10 for 1, then 90 for 2
    nsend, nrecv, starts = resend_plan(cnt, 2, 64)
    assert nsend.tolist() == [0, 0, 0] and nrecv.tolist() == [90, 0, 0]
