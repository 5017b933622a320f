"""scripts/pim_vendor_rows.py: the HBM-PIM and GDDR6-AiM rows are quoted, split by the fixed rule
(recomputed here from SHA-256 by hand), and bad rows are refused with one line naming what is wrong."""

import csv
import hashlib

import pim_vendor_rows as pv
import pytest


def raw_rows():
    with open(pv.ROWS, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def test_split_is_the_first_byte_of_the_ids_sha256_mod_3():
    for raw in raw_rows():
        first = hashlib.sha256(raw["id"].encode()).digest()[0]
        assert raw["split"] == ("fit" if first % 3 == 0 else "held-out"), raw["id"]


def test_every_figure_is_in_the_sentence_it_is_quoted_from():
    for row in pv.read_rows():
        for figure in {row.measured_low, row.measured_high}:
            assert f"{figure:g}" in row.quote, (row.id, figure)
        assert row.source and row.missing


def test_counts_per_device_and_no_held_out_error_without_a_stated_configuration():
    got = pv.summary(pv.read_rows())
    # by hand from the CSV: 8 Aquabolt-XL rows (ISCA'21 x3, IEEE Micro'22 x4, AME-PIM x1), 1 AiM row;
    # fit = first SHA-256 byte % 3 == 0: kernels, energy, speech, u280-gemv-add, ame-tile
    assert got["HBM-PIM (Aquabolt-XL)"] == {"rows": 8, "fit": 5, "held-out": 3, "stated": 0, "held_out_median": None}
    assert got["GDDR6-AiM"] == {"rows": 1, "fit": 0, "held-out": 1, "stated": 0, "held_out_median": None}


def one_row(**change):
    raw = dict(raw_rows()[0])
    raw.update(change)
    return raw


@pytest.mark.parametrize("change, says", [
    ({"device": "HBM3-PIM"}, "allowed: HBM-PIM (Aquabolt-XL), GDDR6-AiM"),
    ({"split": "held-out"}, "the fixed rule gives 'fit'"),
    ({"metric": "tok/s"}, "allowed: speedup, energy efficiency gain, GFLOP/s"),
    ({"measured_low": "12", "measured_high": "11.2"}, "0 < measured_low <= measured_high"),
    ({"missing": ""}, "'missing' must say what the source leaves out"),
    ({"stated": "yes"}, "none is bundled yet"),
    ({"quote": " "}, "empty or absent column(s) quote"),
])
def test_a_bad_row_is_refused_with_one_line(change, says):
    with pytest.raises(pv.VendorRowError) as err:
        pv.parse(one_row(**change))
    assert says in str(err.value) and "\n" not in str(err.value)
    assert "hbm-pim-isca21-kernels" in str(err.value)


def test_the_script_prints_the_rows_and_exits_2_on_a_bad_file(tmp_path, capsys):
    assert pv.main() == 0
    out = capsys.readouterr().out
    assert "GDDR6-AiM: 1 rows (0 fit, 1 held-out), 0 with a stated configuration" in out
    rows = raw_rows()
    rows[1]["split"] = "fit"                          # hbm-pim-isca21-applications is held out by the rule
    bad = tmp_path / "rows.csv"
    with open(bad, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=pv.COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    assert pv.main(str(bad)) == 2
    err = capsys.readouterr().err
    assert err == "error: row hbm-pim-isca21-applications: split 'fit' but the fixed rule gives 'held-out'\n"
