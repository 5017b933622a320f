"""scripts/compare_peers.py reports every peer: numbers, or why there are none."""

import compare_peers


def test_every_peer_is_reported_on_the_cnn(capsys):
    assert compare_peers.main(["--models", "resnet-style CNN"]) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("resnet-style CNN")]
    assert len(rows) == len(compare_peers.PEERS)
    ours = next(r for r in rows if "dispatchprof" in r)
    assert "4.326 M" in ours and "2.064 M" in ours and "1,514" in ours
    for peer in compare_peers.PEERS:
        row = next(r for r in rows if f" {peer} " in r)
        assert any(ch.isdigit() for ch in row.split(peer, 1)[1]) or "not installed" in row or "failed" in row
