"""Stats.pool: pooling generations adds every count and time (chapter 02's statistics).

Every sampling test of the suite is exact (conftest.ExactLaw enumerates every random draw), so the
chi-square helpers that once stood beside this test are gone."""


def test_pooled_stats_add_every_count_and_time():
    from specdec_lib.speculative import Stats

    a, b = Stats(), Stats()
    a.accepted, a.drafted, a.tree_sizes, a.target_forwards, a.new_tokens = [2, 0], [3, 3], [4, 4], 2, 4
    b.accepted, b.drafted, b.tree_sizes, b.target_forwards, b.new_tokens = [3], [3], [4], 1, 4
    a.time_draft, b.time_verify, b.draft_forwards, a.prefill_forwards = 0.5, 0.25, 6, 1
    pooled = Stats.pool([a, b])
    assert pooled.accepted == [2, 0, 3] and pooled.drafted == [3, 3, 3] and pooled.tree_sizes == [4, 4, 4]
    assert (pooled.target_forwards, pooled.new_tokens, pooled.draft_forwards, pooled.prefill_forwards) == (
        3,
        8,
        6,
        1,
    )
    assert pooled.tau == 8 / 3 and pooled.time_total == 0.75
    assert pooled.acceptance_by_position() == [2 / 3, 1.0, 1 / 2]
    assert a.accepted == [2, 0]  # the runs themselves are left alone
