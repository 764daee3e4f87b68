"""The SavedModel's time split into string ops, model steps and beam bookkeeping, on a tiny model."""

from benchmarks.speed import savedmodel_profile


def test_the_parts_add_up_to_the_whole(tokenizer):
    import keras_transformer as kt

    model = kt.Transformer.from_preset("cpu-small", vocab_size=tokenizer.vocab_size, d_model=32, num_heads=2, d_ff=64)
    sentences = ["Shows the current weather.", "A library for reading and writing PNG images.", "Fonts."] * 3
    report = savedmodel_profile.profile(model, tokenizer, sentences, batch_size=4)
    assert report["batches"] == 3 and report["decoding_steps"] > 0
    seconds = report["seconds"]
    assert seconds["model"] > 0 and seconds["strings"] > 0
    assert abs(seconds["strings"] + seconds["model"] + seconds["beam_bookkeeping"] - seconds["whole"]) < 0.05
    assert abs(sum(report["shares"].values()) - 1) < 0.01
