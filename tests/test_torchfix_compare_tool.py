"""tools/torchfix_compare.py's pure parts: the code mapping, reading both tools' output, matching
findings, the triage and the report. Neither TorchFix nor the network is needed."""

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("torchfix_compare", ROOT / "tools" / "torchfix_compare.py")
tc = importlib.util.module_from_spec(spec)
sys.modules["torchfix_compare"] = tc  # dataclasses look their module up there
spec.loader.exec_module(tc)

F = tc.Finding


def test_mapping_follows_spec_section_5():
    spec_text = (ROOT.parent / "shared" / "SPEC.md")
    m = tc.TORCHFIX_TO_TORCHLINT
    assert m["TOR001"] == m["TOR004"] == ("TL803",)
    assert m["TOR101"] == m["TOR103"] == ("TL804", "TL801")
    assert m["TOR102"] == ("TL502",) and m["TOR401"] == ("TL702",) and m["TOR402"] == ("TL109",)
    assert "TOR901" not in m  # internal to PyTorch: no counterpart
    # Each torchlint code of SPEC's table is reached, and each group lists its TorchFix codes.
    assert tc.torchlint_codes() == {"TL801", "TL803", "TL804", "TL805", "TL806", "TL807", "TL808", "TL809",
                                    "TL604", "TL605", "TL606", "TL607", "TL702", "TL109", "TL502"}
    assert tc.groups()[("TL804", "TL801")] == ["TOR101", "TOR103"]
    assert tc.group_of("TL801") == tc.group_of("TOR103") == ("TL804", "TL801")
    assert tc.group_of("TL201") is None
    if spec_text.exists():  # the table's rows name these pairs
        text = spec_text.read_text()
        for tor, tls in m.items():
            if tor != "TOR102":
                assert f"({tor}" in text or f", {tor})" in text, tor


def test_parse_torchfix_reads_findings_between_diffs():
    out = "\n".join([
        "a/x.py:3:1: TOR101 [*] Use of deprecated function torch.cholesky",
        "--- a/x.py",
        "+++ a/x.py",
        "@@ -1,3 +1,3 @@",
        "-y = torch.cholesky(a)",
        "+y = torch.linalg.cholesky(a)",
        "a/x.py:9:5: TOR003 Please pass `use_reentrant` explicitly to `checkpoint`.",
        "other.py:1:1: TOR102 `torch.load` without `weights_only` parameter is unsafe.",
        "Finished checking 2 files.",
    ])
    found = tc.parse_torchfix(out, "in", "repo/", known={"a/x.py"})
    assert [(f.path, f.line, f.code, f.symbol) for f in found] == [
        ("repo/a/x.py", 3, "TOR101", "torch.cholesky"), ("repo/a/x.py", 9, "TOR003", "")]
    assert all(f.tool == "torchfix" and f.input == "in" for f in found)


def test_parse_torchlint_keeps_mapped_codes_in_python_files():
    data = [
        {"code": "TL804", "filename": "./a.py", "location": {"row": 4, "column": 1}, "message": "`torch.qr` is deprecated"},
        {"code": "TL201", "filename": "a.py", "location": {"row": 5, "column": 1}, "message": ""},
        {"code": "TL804", "filename": "n.ipynb", "location": {"row": 1, "column": 1}, "message": "`torch.qr`", "cell": 2},
        {"code": "TL806", "filename": "b.py", "location": {"row": 2, "column": 1}, "message": ""},
    ]
    found = tc.parse_torchlint(data, "in", known={"a.py"})
    assert [(f.path, f.line, f.code, f.symbol) for f in found] == [("a.py", 4, "TL804", "torch.qr")]


def test_statements_place_a_finding_in_its_simple_statement():
    source = "import torch\nfrom functorch import (\n    vmap,\n    grad,\n)\ndef f():\n    return grad()\n"
    spans = tc.statements(source)
    assert (2, 5, True) in spans and (7, 7, False) in spans
    assert tc.place(F("torchlint", "i", "p", 4, "TL804"), spans).statement == "2-5"
    assert tc.place(F("torchlint", "i", "p", 4, "TL804"), spans).at_import
    assert tc.place(F("torchlint", "i", "p", 6, "TL804"), spans).statement == ""  # a def line: no simple statement
    assert tc.statements("def broken(:\n") == []


def test_match_by_line_statement_and_import():
    tf = [
        F("torchfix", "i", "a.py", 10, "TOR101", "torch.qr"),          # torchlint on line 11: within tolerance
        F("torchfix", "i", "a.py", 2, "TOR103", "functorch.grad", "2-5", True),  # torchlint at the name, line 4
        F("torchfix", "i", "a.py", 30, "TOR101", "functorch.grad", "30-30"),    # a use; torchlint reports the import
        F("torchfix", "i", "a.py", 40, "TOR003"),                      # torchlint has none: TorchFix only
        F("torchfix", "i", "b.py", 11, "TOR101", "torch.qr"),          # another file: not matched by a.py's
        F("torchfix", "i", "a.py", 50, "TOR901"),                      # unmapped: not compared
        F("torchfix", "i", "a.py", 60, "TOR202", "torch.float32", "60-60", True),  # an import, but TL808 is not import-anchored
    ]
    tl = [
        F("torchlint", "i", "a.py", 11, "TL804", "torch.qr"),
        F("torchlint", "i", "a.py", 4, "TL804", "functorch.grad", "2-5", True),
        F("torchlint", "i", "a.py", 41, "TL806"),                      # matches TOR003 at 40
        F("torchlint", "i", "a.py", 70, "TL808", "torch.float32"),
        F("torchlint", "i", "a.py", 90, "TL109"),                      # TorchFix has no TOR402 here
    ]
    tf_only, tl_only = tc.match(tf, tl, tolerance=1)
    assert [(f.path, f.line) for f in tf_only] == [("b.py", 11), ("a.py", 60)]
    assert [(f.path, f.line) for f in tl_only] == [("a.py", 70), ("a.py", 90)]
    tf_only, _ = tc.match(tf, tl, tolerance=0)
    assert ("a.py", 10) in [(f.path, f.line) for f in tf_only] and ("a.py", 40) in [(f.path, f.line) for f in tf_only]


def test_match_needs_a_mapped_code():
    tf = [F("torchfix", "i", "a.py", 3, "TOR106")]
    tl = [F("torchlint", "i", "a.py", 3, "TL606")]
    tf_only, tl_only = tc.match(tf, tl, 1)
    assert tf_only == tf and tl_only == tl


TRIAGE = """# notes

| input | path | line | code | symbol | reason |
|---|---|---|---|---|---|
| ignored | a.py | 1 | TL804 | * | not under the heading |

## Triage

| input | path | line | code | symbol | reason |
|---|---|---|---|---|---|
| fixtures | `security/*` | * | TOR102 | * | no project: oldest torch unknown |
| * | * | * | TOR101 | torch.norm | deprecated in the documentation only |
| ecosystem | r/x.py | 12 | TL801 | * | TorchFix 0.7.0 has no amp rule |

## After
| fixtures | z.py | 1 | TOR003 | * | after the section |
"""


def test_read_triage_and_reasons():
    rows = tc.read_triage(TRIAGE)
    assert len(rows) == 3 and rows[0].path == "security/*"
    assert tc.reason_for(F("torchfix", "fixtures", "security/checker/load.py", 6, "TOR102"), rows).startswith("no project")
    assert tc.reason_for(F("torchfix", "ecosystem", "r/y.py", 3, "TOR101", "torch.norm"), rows).startswith("deprecated")
    assert tc.reason_for(F("torchfix", "ecosystem", "r/y.py", 3, "TOR101", "torch.qr"), rows) is None
    assert tc.reason_for(F("torchlint", "ecosystem", "r/x.py", 12, "TL801"), rows) is not None
    assert tc.reason_for(F("torchlint", "ecosystem", "r/x.py", 13, "TL801"), rows) is None
    assert tc.reason_for(F("torchfix", "fixtures", "z.py", 1, "TOR003"), rows) is None


def test_report_counts_lists_and_untriaged():
    tf = [F("torchfix", "fixtures", "security/checker/load.py", 6, "TOR102", "torch.load"),
          F("torchfix", "fixtures", "m.py", 3, "TOR106"), F("torchfix", "fixtures", "m.py", 4, "TOR901")]
    tl = [F("torchlint", "fixtures", "m.py", 3, "TL605"), F("torchlint", "fixtures", "m.py", 20, "TL607", "torch.log")]
    text, untriaged = tc.report(tf, tl, 1, tc.read_triage(TRIAGE))
    assert untriaged == 1  # the TL607 finding; TOR102 is triaged
    assert "| TOR106 | TL605 | 1 (TOR106 1) | 1 (TL605 1) | 0 | 0 | 0 |" in text
    assert "| TOR102 | TL502 | 1 (TOR102 1) | 0 (TL502 0) | 1 | 0 | 0 |" in text
    assert "| TOR108 | TL607 | 0 (TOR108 0) | 1 (TL607 1) | 0 | 1 | 1 |" in text
    assert "`security/checker/load.py:6` no project: oldest torch unknown" in text
    assert "`m.py:20` **untriaged**" in text
    assert "TOR901 1" in text
    assert "Untriaged differences: 1." in text
