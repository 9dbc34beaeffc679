"""The safe JSON/YAML loader behind configs, report.json and packs."""

from __future__ import annotations

import tracemalloc

import pytest

from seffi.errors import SeffiError
from seffi.report.safe_load import check_depth, load_json_file, loads_json, loads_yaml, read_text

# 1.4 KB that expands to 9**9 strings with a plain yaml.safe_load.
LAUGHS = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n' + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 9)}]\n" for i in range(8)
)


def _one_line(exc_info) -> str:
    msg = str(exc_info.value)
    assert "\n" not in msg
    return msg


def test_yaml_aliases_are_refused_in_one_line_and_little_memory():
    """A billion-laughs YAML is refused in one line naming the first alias, with under 5 MB traced."""
    assert len(LAUGHS) < 2000
    tracemalloc.start()
    try:
        with pytest.raises(SeffiError) as info:
            loads_yaml(LAUGHS, source="config file c.yaml")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert _one_line(info) == "config file c.yaml: aliases (*a) are not allowed (line 2, column 8)"
    assert peak < 5e6, peak


def test_yaml_duplicate_keys_name_the_key():
    """YAML (and JSON) keep the last of two equal keys silently; we refuse, naming it."""
    with pytest.raises(SeffiError) as info:
        loads_yaml("budget: 8\nseed: 1\nbudget: 16\n", source="c.yaml")
    assert _one_line(info) == "c.yaml: duplicate key 'budget' (line 3, column 1)"
    with pytest.raises(SeffiError, match="duplicate key 'skew'"):
        loads_yaml("task_options:\n  hanoi: {skew: 1, skew: 2}\n", source="c.yaml")
    with pytest.raises(SeffiError) as info:
        loads_json('{"a": {"x": 1, "x": 2}}', source="c.json")
    assert _one_line(info) == "c.json: duplicate key 'x'"
    # Equal keys in different mappings are fine.
    assert loads_json('{"a": {"x": 1}, "b": {"x": 2}}', source="c.json") == {"a": {"x": 1}, "b": {"x": 2}}
    assert loads_yaml("a: {x: 1}\nb: {x: 2}\n", source="c.yaml") == {"a": {"x": 1}, "b": {"x": 2}}


@pytest.mark.parametrize("kind", ["yaml-flow", "yaml-block", "json"])
def test_deep_nesting_is_one_line_at_the_cap(kind):
    """Depth cap exact; 100k levels give one line, not RecursionError."""

    def text(depth: int) -> str:
        if kind == "yaml-block":
            return "".join("  " * i + f"k{i}:\n" for i in range(depth - 1)) + "  " * (depth - 1) + "leaf: 1\n"
        return "[" * depth + "1" + "]" * depth

    load = loads_json if kind == "json" else loads_yaml
    assert check_depth(load(text(10), source="f", max_depth=10), source="f", max_depth=10) is None
    with pytest.raises(SeffiError) as info:
        load(text(11), source="f", max_depth=10)
    assert "nested deeper than 10 levels" in _one_line(info)
    if kind != "yaml-block":
        with pytest.raises(SeffiError) as info:
            load(text(100_000), source="f")
        assert "nested deeper than 64 levels" in _one_line(info)


def test_files_non_utf8_too_large_missing(tmp_path):
    """Non-UTF-8 bytes, an oversized file and a missing file: one line each."""
    bad = tmp_path / "bad.yaml"
    bad.write_bytes(b"budget: 8\nname: caf\xe9\n")
    with pytest.raises(SeffiError) as info:
        read_text(bad, what="config file")
    assert _one_line(info) == f"config file {bad} is not UTF-8 text (byte 0xe9 at offset 19)"
    big = tmp_path / "big.json"
    big.write_text("[" + "1," * 600 + "1]")
    with pytest.raises(SeffiError, match=r"is larger than 1,000 bytes"):
        load_json_file(big, max_bytes=1000)
    with pytest.raises(SeffiError, match="cannot read pack"):
        load_json_file(tmp_path / "missing.json", what="pack")
    bom = tmp_path / "bom.json"
    bom.write_bytes(b'\xef\xbb\xbf{"a": 1}')
    assert load_json_file(bom) == {"a": 1}


def test_json_rejects_non_finite_and_huge_ints():
    """NaN/Infinity and 5,000-digit integers are one line, never a traceback."""
    with pytest.raises(SeffiError, match="NaN is not a number JSON allows"):
        loads_json('{"coverage": [NaN]}', source="r.json")
    with pytest.raises(SeffiError) as info:
        loads_json('{"budget": ' + "9" * 5000 + "}", source="r.json")
    assert "4300 digits" in _one_line(info)
    with pytest.raises(SeffiError) as info:
        loads_yaml("budget: " + "9" * 5000, source="c.yaml")
    assert "4300 digits" in _one_line(info)
    with pytest.raises(SeffiError, match=r"not valid JSON: Expecting value \(line 1, column 6\)"):
        loads_json('{"a":', source="r.json")


def test_a_fifo_or_an_oversized_file_is_refused_before_reading(tmp_path, capsys):
    """A FIFO given as a config file would block the read; a huge file is refused by its size alone."""
    import os

    from seffi.cli import main
    from seffi.errors import SeffiError
    from seffi.report.safe_load import read_text

    fifo = tmp_path / "config.yaml"
    os.mkfifo(fifo)
    assert (
        main(["run", "--config", str(fifo), "--print-config"]) == 2
    )  # returns at once: nothing opens the FIFO
    assert "is not a regular file" in capsys.readouterr().err
    big = tmp_path / "report.json"
    with big.open("wb") as f:
        f.truncate(600 * 2**20)  # 600 MB of holes: no disk used, and never read
    with pytest.raises(SeffiError, match="is larger than"):
        read_text(big, what="report", max_bytes=2**20)
