"""The leak check's definitions: tokens, vocabulary, secrets, and what counts as a leak."""

from __future__ import annotations

from lumos.synth import obfuscate_kineto as ok
from lumos.synth.leaks import find_leak, is_vocabulary, secrets_of
from lumos.synth.obfuscate_names import Namer


def test_secrets_are_non_vocabulary_tokens_of_four_or_more() -> None:
    got = secrets_of(["model.Zorb_Blub.fwd", "cudaStreamWaitEvent", "Input Dims", "0x7ffd12",
                      "3fa9c01b-77de", "ProfilerStep#3", "abc"])  # fmt: skip
    assert got == {"model", "Zorb_Blub", "Zorb", "Blub"}  # "block" is a Kineto key: vocabulary


def test_a_leak_is_a_secret_inside_an_untrusted_output_token() -> None:
    secrets = {"Zorblax", "forward"}
    assert find_leak(b'{"name": "gemm.3fa9c01b2d4e", "cat": "kernel"}', secrets) is None
    assert find_leak(b'{"name": "xZorblaxy"}', secrets) == "Zorblax"
    assert find_leak(b'{"name": "9Zorblax"}', secrets) == "Zorblax"
    assert find_leak(["a.forward_pass"], secrets) == "forward"
    assert find_leak(b"", set()) is None


def test_the_hash_alphabet_and_class_names_are_vocabulary() -> None:
    namer = Namer("k")
    for name in ("ZorblaxSecretBlock", "nn.Module: Foo_0", "weird kernel"):
        new = namer.span(name)
        assert all(is_vocabulary(t) for t in new.replace(":", ".").split(".") if len(t) >= 4)


def test_every_key_kineto_output_keeps_is_vocabulary() -> None:
    keys = [*ok._NUMBER_ARGS, *ok._TEXT_ARGS, *ok._PG_ARGS, *ok._SHAPE_ARGS, *ok._LIST_ARGS,
            *ok._TOP_NUMBERS, *ok._DIST_NUMBERS, *ok._PG_NUMBERS, *ok._KNOWN_CATS,
            "displayTimeUnit", "deviceProperties", "distributedInfo", "traceEvents", "pg_config",
            "backend_config", "nccl_version", "ranks", "process_labels", "process_sort_index",
            "thread_sort_index", "GPU (compute 9.0)"]  # fmt: skip
    assert [k for k in keys if not Namer.safe(k)] == []
