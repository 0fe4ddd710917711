from forgetting.grid import (
    BASELINE,
    PAPER_CONFIGURATIONS,
    TIMINGS,
    filter_configurations,
    paper_configuration,
)


def test_the_paper_grid_has_42_configurations_with_stable_unique_names():
    names = [d.name for d in PAPER_CONFIGURATIONS]
    assert len(names) == 42 == len(set(names))
    assert "delayed-turn-tool_output-50" in names
    assert "immediate-token-both-25" in names
    # token-level 100 % equals turn-level 100 % and is not run
    assert not any(d.granularity == "token" and d.amount == 100 for d in PAPER_CONFIGURATIONS)


def test_each_dimension_appears_as_specified():
    by = lambda key: sorted({getattr(d, key) for d in PAPER_CONFIGURATIONS})  # noqa: E731
    assert by("scope") == ["both", "reasoning", "tool_output"]
    assert by("granularity") == ["token", "turn"]
    assert by("amount") == [25.0, 50.0, 75.0, 100.0]
    assert by("timing") == ["delayed", "immediate"]
    for d in PAPER_CONFIGURATIONS:
        assert d.keep_last == TIMINGS[d.timing]
        assert d.name == f"{d.timing}-{d.granularity}-{d.scope}-{int(d.amount)}"
        assert paper_configuration(d.name) == d


def test_delayed_keeps_two_turns_and_immediate_none():
    assert paper_configuration("delayed-turn-both-100").keep_last == 2
    assert paper_configuration("immediate-turn-both-100").keep_last == 0
    assert paper_configuration(BASELINE).is_baseline


def test_filter_by_dimension():
    chosen = filter_configurations(PAPER_CONFIGURATIONS, scope=["tool_output"], timing=["delayed"])
    assert len(chosen) == 7
    chosen = filter_configurations(PAPER_CONFIGURATIONS, granularity=["token"], amount=[75])
    assert sorted(d.name for d in chosen) == sorted(
        f"{t}-token-{s}-75" for t in ("delayed", "immediate") for s in ("reasoning", "tool_output", "both")
    )
