"""The search's and preparation's configuration objects: built from arguments and breadth's settings (Dask's
``breadth.*`` namespace, whose defaults ship in the package) in one place, carried to every rank, recorded in
the Graph500 header."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import dask
import pytest
import yaml

from breadth.bfs import SearchConfig, graph500, run_session
from breadth.pipeline import PrepareConfig, kronecker, prepare


def test_the_shipped_defaults_are_the_classes_defaults():
    from breadth.bfs.settings import DEFAULTS

    with open(DEFAULTS) as f:
        shipped = yaml.safe_load(f)["breadth"]
    assert shipped["search"] == SearchConfig().as_dict()
    assert {**shipped["prepare"], **shipped["shuffle"]} == PrepareConfig().as_dict()
    assert set(shipped["shuffle"]) == {"tier", "exchange"}
    # and they are Dask's own once breadth.bfs is imported (this test's environment sets none of them)
    assert dask.config.get("breadth.search.beta") == 18.0 and dask.config.get("breadth.shuffle.tier") == "auto"


def test_environment_variables_reach_the_configs():
    code = ("from breadth.bfs import SearchConfig; from breadth.pipeline import PrepareConfig; "
            "s, p = SearchConfig.from_config(), PrepareConfig.from_config(); "
            "print(s.beta, s.level_graphs, s.graph_caps, s.nccl_poll, p.tier, p.batch_entries)")
    env = {k: v for k, v in os.environ.items() if not k.startswith("DASK_BREADTH__")}
    env.update(DASK_BREADTH__SEARCH__BETA="30", DASK_BREADTH__SEARCH__LEVEL_GRAPHS="0",
               DASK_BREADTH__SEARCH__GRAPH_CAPS="16,64", DASK_BREADTH__SEARCH__NCCL_POLL="sleep",
               DASK_BREADTH__SHUFFLE__TIER="disk", DASK_BREADTH__PREPARE__BATCH_ENTRIES="4096")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split() == ["30.0", "False", "(16,", "64)", "sleep", "disk", "4096"]


def test_dask_config_set_reaches_the_configs_and_given_fields_win():
    with dask.config.set({"breadth.search.level_graphs": False, "breadth.search.alpha": 3,
                          "breadth.search.spec-pairs": 0, "breadth.shuffle.exchange": "dask"}):
        cfg = SearchConfig.from_config(beta=20.0, alpha=None)  # None: the setting's
        prep = PrepareConfig.from_config(keep_edges=False)
    assert (cfg.level_graphs, cfg.alpha, cfg.beta, cfg.spec_pairs) == (False, 3.0, 20.0, 0)
    assert (prep.exchange, prep.keep_edges, prep.tier) == ("dask", False, "auto")
    assert SearchConfig.from_config() == SearchConfig() and PrepareConfig.from_config() == PrepareConfig()
    assert json.loads(json.dumps(SearchConfig(graph_caps=(16, 64)).as_dict()))["graph_caps"] == [16, 64]
    with pytest.raises(ValueError, match="nccl_poll"):
        SearchConfig(nccl_poll="busy")


@pytest.mark.parametrize("key,value,message", [
    ("breadth.search.beta", "fast", "breadth.search.beta (DASK_BREADTH__SEARCH__BETA) must be a number, got 'fast'"),
    ("breadth.search.level_graphs", 2, "breadth.search.level_graphs (DASK_BREADTH__SEARCH__LEVEL_GRAPHS) must be "
                                       "true or false, got 2"),
    ("breadth.search.graph_caps", [16], "breadth.search.graph_caps (DASK_BREADTH__SEARCH__GRAPH_CAPS) must be two "
                                        "integers > 0"),
    ("breadth.search.rank_affinity", "any", "breadth.search.rank_affinity (DASK_BREADTH__SEARCH__RANK_AFFINITY) "
                                            "must be one of worker, all, got 'any'"),
    ("breadth.search.betta", 30, "breadth.search.betta (DASK_BREADTH__SEARCH__BETTA) is not one of breadth's "
                                 "settings (breadth.search: alpha, beta, "),
    ("breadth.serch.beta", 30, "breadth.serch (DASK_BREADTH__SERCH) is not a section of breadth's settings"),
])
def test_a_bad_setting_is_one_error_naming_it(key, value, message):
    with dask.config.set({key: value}), pytest.raises(ValueError) as e:
        SearchConfig.from_config()
    assert message in str(e.value) and "\n" not in str(e.value)


def test_a_bad_preparation_setting_fails_prepare_before_any_work():
    with dask.config.set({"breadth.shuffle.tier": "ram"}), pytest.raises(
            ValueError, match=r"breadth.shuffle.tier \(DASK_BREADTH__SHUFFLE__TIER\) must be one of auto, memory, "
                              r"host, disk, got 'ram'"):
        prepare(kronecker(6, seed=1), object())  # no client: it fails before asking one anything
    with dask.config.set({"breadth.prepare.batch_entries": 0}), pytest.raises(ValueError, match="batch_entries"):
        PrepareConfig.from_config()


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
    with dask.config.set({"breadth.search.alpha": 0}):  # a search without a config reads the settings
        cfg, dirs = run_session(graph, _directions, root)[0]
    assert cfg["alpha"] == 0.0 and dirs == ["td"]
    res = graph500(graph, nroots=2, config=SearchConfig(beta=24.0), alpha=2.0)
    header = json.loads(res.header["search_config"])
    assert header["beta"] == 24.0 and header["alpha"] == 2.0
    assert "search_config: {" in res.report()
