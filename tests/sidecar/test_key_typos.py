"""Issue 35: nothing a user writes in a YAML file the tool reads is ignored.

Every key of the language's tables (global, layer, `unload`/`data_buffer` records), and
every name of a weight-bits file, misspelt and mis-cased, in a full sidecar, a partial
one and a weight-bits file: refused, at the file and line of the misspelt key, with a
suggestion naming the key meant. The misspellings are generated from the key tables
themselves (a dropped, doubled or swapped letter, and a change of case), so a key added
to a table is covered without touching this file.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from onnx2ai8x import api
from onnx2ai8x.errors import Ai8xError
from onnx2ai8x.sidecar.parse import DATA_BUFFER_KEYS, GLOBAL_KEYS, LAYER_KEYS, UNLOAD_KEYS

ROOT = Path(__file__).resolve().parents[2]
DIGITS = ROOT / "examples" / "digits" / "digits.onnx"
FLOAT = ROOT / "examples" / "digits_float"
FLOAT_LAYERS = ("features.0", "features.4", "features.8", "classifier")


def _edits(a: str, b: str) -> int:
    """Levenshtein distance with swaps of neighbours counted as one edit (written here
    independently of the converter's own)."""
    d = {(i, -1): i + 1 for i in range(-1, len(a))}
    d.update({(-1, j): j + 1 for j in range(-1, len(b))})
    for i, ca in enumerate(a):
        for j, cb in enumerate(b):
            d[i, j] = min(d[i - 1, j] + 1, d[i, j - 1] + 1, d[i - 1, j - 1] + (ca != cb))
            if i and j and ca == b[j - 1] and a[i - 1] == cb:
                d[i, j] = min(d[i, j], d[i - 2, j - 2] + 1)
    return d[len(a) - 1, len(b) - 1]


def _typos(key: str, index: int) -> list[str]:
    """A slip of the keyboard (which kind cycles with `index`, so every kind is used
    across a table) and a change of case."""
    slips = [key[:1] + key[2:] if len(key) > 2 else key + key[-1],  # a letter dropped
             key[:2] + key[1:] if len(key) > 1 else key * 2,  # a letter doubled
             key[:1] + key[2:3] + key[1:2] + key[3:] if len(key) > 2 else key[::-1]]
    slip = slips[index % len(slips)]
    case = key.upper() if index % 2 else key.capitalize()
    return [slip, case]


def _cases(table: tuple[str, ...]) -> list[tuple[str, str]]:
    """(misspelling, key meant) for every key of `table`, keeping only misspellings that
    are not another key and that are nearer the key meant than any other key."""
    out = []
    for index, key in enumerate(table):
        for typo in _typos(key, index):
            if typo in table:
                continue
            near = _edits(typo.lower(), key)
            if all(_edits(typo.lower(), other) > near for other in table if other != key):
                out.append((typo, key))
    return out


@pytest.fixture(scope="module")
def full_text() -> str:
    return api.check(DIGITS, "MAX78000").sidecar


def _refused(tmp_path: Path, text: str, typo: str, meant: str, **kw) -> None:
    path = tmp_path / "typo.yaml"
    path.write_text(text)
    line = next(n for n, row in enumerate(text.splitlines(), 1)
                if row.strip().startswith(f"- {typo}:") or row.strip().startswith(f"{typo}:"))
    with pytest.raises(Ai8xError) as err:
        if "weight_bits" in kw:
            api.check(FLOAT / "digits_float.onnx", "MAX78000",
                      calibration=FLOAT / "calibration.npy", weight_bits=path)
        else:
            api.check(DIGITS, "MAX78000", sidecar=path)
    diag = err.value.diagnostics[0]
    assert diag.where.startswith(f"{path}:{line}:") or diag.where == f"{path}:{line}", \
        (typo, diag.where)
    assert f"did you mean `{meant}`?" in diag.hint, (typo, diag.render())
    assert err.value.exit_code != 0


def test_the_tables_give_cases_for_every_key():
    for table in (GLOBAL_KEYS, LAYER_KEYS, UNLOAD_KEYS, DATA_BUFFER_KEYS):
        meant = {key for _, key in _cases(table)}
        assert meant == set(table), set(table) - meant


@pytest.mark.parametrize("typo, meant", _cases(GLOBAL_KEYS))
def test_global_key_typo_in_a_full_sidecar(tmp_path, full_text, typo, meant):
    if meant in ("arch", "dataset", "layers"):  # written: misspell it where it is
        text = full_text.replace(f"\n{meant}:", f"\n{typo}:", 1)
    else:
        text = full_text + f"{typo}: 1\n"
    _refused(tmp_path, text, typo, meant)


@pytest.mark.parametrize("typo, meant", _cases(GLOBAL_KEYS))
def test_global_key_typo_in_a_partial_sidecar(tmp_path, typo, meant):
    pin = "  - name: conv1\n    processors: 0x0000000000000001\n"
    text = (f"{typo}:\n{pin}" if meant == "layers" else f"{typo}: 1\nlayers:\n{pin}")
    _refused(tmp_path, text, typo, meant)


@pytest.mark.parametrize("typo, meant", _cases(LAYER_KEYS))
def test_layer_key_typo_in_a_full_sidecar(tmp_path, full_text, typo, meant):
    text = full_text.replace("  - name: conv1\n", f"  - name: conv1\n    {typo}: 1\n", 1)
    assert text != full_text
    _refused(tmp_path, text, typo, meant)


@pytest.mark.parametrize("typo, meant", _cases(LAYER_KEYS))
def test_layer_key_typo_in_a_partial_sidecar(tmp_path, typo, meant):
    _refused(tmp_path, f"layers:\n  - name: conv1\n    {typo}: 1\n", typo, meant)


@pytest.mark.parametrize("table, typo, meant",
                         [("unload", *c) for c in _cases(UNLOAD_KEYS)]
                         + [("data_buffer", *c) for c in _cases(DATA_BUFFER_KEYS)])
def test_record_key_typo_in_a_full_sidecar(tmp_path, full_text, table, typo, meant):
    _refused(tmp_path, full_text + f"{table}:\n  - {typo}: 1\n", typo, meant)


@pytest.mark.parametrize("typo, meant", _cases(("default", *FLOAT_LAYERS)))
def test_weight_bits_name_typo(tmp_path, typo, meant):
    _refused(tmp_path, f"features.4: 8\n{typo}: 4\n", typo, meant, weight_bits=True)


def test_an_entry_too_many_is_refused_at_its_line(tmp_path, full_text):
    """`error[sidecar.layers] layers[4]: ...` named neither the file nor the line."""
    entry = full_text[full_text.rindex("  - name: "):]
    path = tmp_path / "long.yaml"
    path.write_text(full_text + entry.replace("- name: ", "- name: extra_"))
    line = path.read_text().splitlines().index(
        entry.replace("- name: ", "- name: extra_").splitlines()[0]) + 1
    with pytest.raises(Ai8xError) as err:
        api.check(DIGITS, "MAX78000", sidecar=path)
    diag = err.value.diagnostics[0]
    assert diag.code == "sidecar.layers" and diag.where.startswith(f"{path}:{line}: "), \
        diag.render()


@pytest.mark.parametrize("pins, claim", [
    ("", "pinned no `processors`"),
    ("    processors: 0x0000000000000001\n", "The pins of hint.yaml are kept (`processors` "
                                              "of conv1)"),
])
def test_the_written_sidecar_claims_only_what_was_kept(tmp_path, pins, claim):
    """digits.yaml said "Mapping keys given in X.yaml are kept" when nothing was."""
    path = tmp_path / "hint.yaml"
    path.write_text(f"layers:\n  - name: conv1\n    op: conv2d\n{pins}")
    text = api.check(DIGITS, "MAX78000", sidecar=path).sidecar
    assert claim in text and ("are kept" in text) == bool(pins)


def test_a_partial_sidecar_says_which_of_its_keys_it_does_not_use(tmp_path, capsys):
    """A key the model decides, restated in a partial sidecar (`output_shift: 3` in the
    hope it applies), was read and dropped without a word."""
    from onnx2ai8x.cli import main

    path = tmp_path / "hint.yaml"
    path.write_text("layers:\n  - name: conv1\n    processors: 0x0000000000000001\n"
                    "    output_shift: 3\n")
    assert main(["check", str(DIGITS), "--device", "MAX78000", "--sidecar", str(path)]) == 0
    err = capsys.readouterr().err
    assert f"warning[sidecar.restated] {path}:4:" in err and "`output_shift`" in err
    path.write_text("layers:\n  - name: conv1\n    processors: 0x0000000000000001\n")
    assert main(["check", str(DIGITS), "--device", "MAX78000", "--sidecar", str(path)]) == 0
    assert "restated" not in capsys.readouterr().err


def test_a_vendor_description_read_by_import_izer_names_the_line(tmp_path, full_text):
    """import-izer reads a sidecar through parse_file: its errors carry the line too."""
    from onnx2ai8x.sidecar import parse_file

    path = tmp_path / "net.yaml"
    path.write_text(full_text.replace("    kernel_size: 3x3\n", "    kernal_size: 3x3\n", 1))
    line = path.read_text().splitlines().index("    kernal_size: 3x3") + 1
    with pytest.raises(Ai8xError) as err:
        parse_file(path)
    diag = err.value.diagnostics[0]
    assert diag.where.startswith(f"{path}:{line}: ") and "`kernel_size`" in diag.hint
