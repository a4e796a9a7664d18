"""The search's one configuration object: built from arguments and ``BREADTH_*`` overrides in one place,
carried to every rank, recorded in the Graph500 header."""

from __future__ import annotations

import json

import pytest

from breadth.bfs import SearchConfig, graph500, run_session
from breadth.pipeline import kronecker, prepare


def test_environment_overrides_are_read_in_one_place():
    env = {"BREADTH_LEVEL_GRAPHS": "0", "BREADTH_GRAPH_CAPS": "16,64", "BREADTH_ALPHA": "3",
           "BREADTH_NCCL_POLL": "sleep", "BREADTH_SPEC_PAIRS": "0", "UNRELATED": "1"}
    cfg = SearchConfig.from_env(env, beta=20.0)
    assert (cfg.level_graphs, cfg.graph_caps, cfg.alpha, cfg.beta, cfg.nccl_poll, cfg.spec_pairs) == \
        (False, (16, 64), 3.0, 20.0, "sleep", 0)
    assert SearchConfig.from_env({"BREADTH_BETA": "7"}, beta=20.0).beta == 20.0  # given beats the environment
    assert SearchConfig.from_env({}) == SearchConfig()
    assert json.loads(json.dumps(cfg.as_dict()))["graph_caps"] == [16, 64]
    with pytest.raises(ValueError, match="nccl_poll"):
        SearchConfig(nccl_poll="busy")


def _directions(engine, setup_s, root):
    engine.search(int(root))
    return engine.config.as_dict(), sorted({r.direction for r in engine.records})


@pytest.fixture(scope="module")
def graph(client):
    g = prepare(kronecker(12, seed=3), client)
    yield g
    g.release()


def test_the_config_reaches_the_ranks_and_the_report(graph):
    root = int(graph500(graph, nroots=1, validate=False).rows[0]["root"])
    cfg, dirs = run_session(graph, _directions, root, config=SearchConfig(alpha=0.0))[0]
    assert cfg["alpha"] == 0.0 and dirs == ["td"]  # alpha 0: never bottom-up
    cfg, dirs = run_session(graph, _directions, root, config=SearchConfig(alpha=1e9, beta=1e-9))[0]
    assert "bu" in dirs and cfg["beta"] == 1e-9  # bottom-up as soon as it may
    res = graph500(graph, nroots=2, config=SearchConfig(beta=24.0), alpha=2.0)
    header = json.loads(res.header["search_config"])
    assert header["beta"] == 24.0 and header["alpha"] == 2.0
    assert "search_config: {" in res.report()
