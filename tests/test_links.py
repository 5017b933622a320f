"""The shared link formulas (dispatchprof.sim.links): all-to-all, send, the named link table."""

import pytest

from dispatchprof.sim.links import BUS_EFFICIENCY, LINKS, all_to_all_s, named_link, send_s


def test_all_to_all_by_hand():
    # 8 ranks, each sends 16 MB in all, 1/8 of it to itself: 7/8 * 16e6 B / 1e9 B/s = 14 ms, + 1 ms
    assert all_to_all_s(16e6, 8, 1e9, 1e-3) == pytest.approx(15e-3)
    # one rank: nothing leaves the device
    assert all_to_all_s(16e6, 1, 1e9, 1e-3) == 0.0
    assert all_to_all_s(0, 8, 1e9, 1e-3) == 0.0


def test_named_link_applies_the_bus_efficiency():
    # ib-ndr: 50 GB/s one way x 0.8 = 40e9 B/s; 5 us
    bw, lat = named_link("ib-ndr")
    assert BUS_EFFICIENCY == 0.8
    assert bw == pytest.approx(40e9) and lat == pytest.approx(5e-6)
    # a 0.5 GB cache over it: 0.5e9 / 40e9 = 12.5 ms + 5 us
    assert send_s(0.5e9, bw, lat) == pytest.approx(12.505e-3)
    assert set(LINKS) == {"nvlink4", "nvlink5", "ib-ndr", "roce-400g", "eth-100g", "pcie5", "ib-xdr"}
    # ib-xdr (ConnectX-8, 800 Gb/s): 100 GB/s x 0.8 = 80e9 B/s; the same cache in 6.25 ms + 5 us
    assert send_s(0.5e9, *named_link("ib-xdr")) == pytest.approx(6.255e-3)


def test_unknown_link_names_the_known_ones():
    with pytest.raises(ValueError, match=r"unknown link 'ib'; known links: nvlink4, nvlink5, ib-ndr, roce-400g"):
        named_link("ib")
