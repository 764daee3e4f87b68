"""``choose-alpha`` (flows/tools/choose_alpha.py): finds a run's files, decodes validation once per alpha,
picks by BLEU."""

import shutil

import pytest

from flows.tools import choose_alpha
from tests.commands import main_json
from tests.keras_transformer.tiny_models import save_as_before_decoding_was_kept


def test_the_best_alpha_is_the_highest_bleu_and_ties_go_to_the_smaller():
    choose = choose_alpha.choose

    results = [{"alpha": 0.6, "bleu": 10.0}, {"alpha": 1.0, "bleu": 12.5}, {"alpha": 0.2, "bleu": 12.5}]
    assert choose(results)["alpha"] == 0.2
    assert choose(results[:2])["alpha"] == 1.0
    # The guard is kept only for more BLEU, not for as much.
    guarded = [{"alpha": 0.2, "bleu": 12.5, "repetition_guard": 4}, *results]
    assert choose(guarded) == results[2]
    assert choose([{**guarded[0], "bleu": 12.6}, *results])["repetition_guard"] == 4


@pytest.mark.slow
def test_choose_alpha_on_a_run_directory(ddtp_corpus, tokenizer_model, tmp_path):
    import keras_transformer as kt
    from keras_transformer.tokenizer import SubwordTokenizer

    run_dir = tmp_path / "demo"
    run = run_dir / "runs" / "0123abcd"
    (run / "averaged").mkdir(parents=True)
    (run_dir / "tokenizer").mkdir()
    (run_dir / "data").mkdir()
    shutil.copy(tokenizer_model, run_dir / "tokenizer" / "spm.model")
    (run_dir / "data" / "ddtp-en-de").symlink_to(ddtp_corpus.directory)
    (run_dir / "latest").symlink_to(run)
    vocab_size = SubwordTokenizer(tokenizer_model).vocab_size
    model = kt.Transformer(vocab_size=vocab_size, num_layers=1, d_model=16, num_heads=2, d_ff=32)
    model.build()
    save_as_before_decoding_was_kept(model, run / "averaged" / "model.keras")
    # Saved without a decoding of its own, as models were before they kept their preset's: the run's
    # model_config.json names the preset, whose decoding (sentence by sentence) the evaluation uses.
    from keras_transformer.checkpoints.model_checkpoint import model_config_dict, write_model_config
    write_model_config(run / "averaged", model_config_dict(model, preset="demo"))

    report = main_json(choose_alpha.main, "--run", run_dir / "latest", "--alphas", "0,1.5", "--guards", "0,3",
                       "--confirm-on", "test", "--beam-size", 2, "--max-sentences", 3, "--max-length-offset", 3)
    assert report["split"] == "validation" and report["sentences"] == 3 and report["split_sentences"] is True
    assert [(r["alpha"], r["repetition_guard"]) for r in report["results"]] == [
        (a, g) for g in (0, 3) for a in (0.0, 1.5)]
    best = report["best_alpha"], report["best_repetition_guard"]
    assert report["config"] == (f"evaluation.decoding.length_penalty: {best[0]}, "
                                f"evaluation.decoding.repetition_guard: {best[1]}")
    # The chosen settings are those of the highest validation BLEU among those tried (a tie: the mildest).
    top = max(round(r["bleu"], 6) for r in report["results"])
    mildest = min((r for r in report["results"] if round(r["bleu"], 6) == top),
                  key=lambda r: (r["repetition_guard"], r["alpha"]))
    assert best == (mildest["alpha"], mildest["repetition_guard"])
    assert report["best_bleu"] == mildest["bleu"]
    # The chosen alpha on the test split and its unseen-packages companion, with and without the guard.
    assert set(report["confirmation"]) == {f"repetition_guard={g}" for g in (0, 3)}
    assert set(report["confirmation"]["repetition_guard=3"]) == {"test", "test_unseen"}
    for entry in report["results"]:
        assert 0 <= entry["bleu"] <= 100 and 0 <= entry["brevity_penalty"] <= 1
        assert {"chrf", "length_ratio", "looping_hypotheses", "looping_references"} <= set(entry)


def test_a_test_split_is_refused(tmp_path):
    main = choose_alpha.main

    with pytest.raises(SystemExit):
        main(["--model", str(tmp_path / "m.keras"), "--tokenizer", str(tmp_path / "t.model"),
              "--corpus-dir", str(tmp_path), "--split", "test_unseen"])
