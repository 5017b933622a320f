"""Links between GPUs and the time of the collectives and transfers that run over them: the one
place for these formulas (training's TP/PP/DP/FSDP, serving's tensor, expert and pipeline
parallelism and its KV-cache transfers all call them).

Two links per GPU (units in the names; GB/s are 1e9 bytes/s, one direction):

- scale-up, inside a node: the device profile's ``interconnect_gb_per_s`` (NVLink; the datasheet's
  both-directions total, so one direction is half of it: H100/H200 SXM 900 -> 450 GB/s), its
  ``interconnect_latency_us`` per collective;
- scale-out, across nodes: ``SCALE_OUT_GB_PER_S`` per GPU (one 400 Gb/s NDR InfiniBand / RoCE NIC
  per GPU, as DGX H100 and the HGX H100/H200 reference systems have: 400e9 / 8 = 50 GB/s one
  way; NVIDIA DGX H100 user guide, "8x single-port ConnectX-7 ... 400 Gb/s"),
  ``SCALE_OUT_LATENCY_US`` per collective (assumed: an InfiniBand hop plus NCCL's protocol).

``BUS_EFFICIENCY`` is the share of a link's bandwidth a large NCCL collective reaches (its
bus bandwidth / link bandwidth). It is an assumed figure, not a measurement: it is stated here
so that every collective uses the same one, and the validation (scripts/validate_training.py)
reports what it gives.

A group of ``n`` ranks that lies inside one node uses scale-up. One that spans nodes runs NCCL's
rings over rail-aligned NICs: each ring crosses every node boundary once per channel, so a node's
share of the ring's traffic is spread over the NICs of the group's ``r`` ranks on that node
(``r = min(n, gpus_per_node / stride)``, at least 1, for ranks ``stride`` apart), and the group's
bandwidth per GPU is ``min(scale-up, r * scale-out)``: a data-parallel group of all 8 GPUs of each
node moves 8 NICs' worth, one with a single rank per node (tp = 8) one NIC's. Ring collectives,
per GPU, for ``nbytes`` the size of the whole (unsharded) buffer:

    all-gather, reduce-scatter: (n-1)/n * nbytes / bw + latency
    all-reduce:               2 (n-1)/n * nbytes / bw + latency
    all-to-all:                 (n-1)/n * nbytes / bw + latency   (nbytes: what one rank sends in all,
                                                                 its own share staying local)
    point-to-point send/recv:         nbytes / bw + latency

**Small collectives grow with the ring** (`ring_allreduce_latency_s`): a profile's
``interconnect_latency_us`` is a small all-reduce between two GPUs (NVIDIA/nccl#1259: ~6 us on 2x
H100 NVLink); a ring all-reduce over n ranks takes 2 (n-1) steps, and NCCL's own tuning model adds
a fixed latency per step (src/graph/tuning.cc, NCCL 2.2x: ``hwLat[NVLINK][RING][LL] = .6`` us,
``hwLat[PCI][RING][LL] = 1.0``), the profile's ``interconnect_step_us``, so each rank past the
second adds two steps: 6 + 2 (8-2) x 0.6 = 13.2 us over 8 H100s. Tensor parallelism's all-reduces after each
sharded layer (`dispatchprof.sim.timing.allreduce`: a decode step's are a few kilobytes, all
latency) take it; the ring formulas below keep the link's latency as given (their buffers are
gradients and activations, where the bytes decide).

**Named links** (`LINKS`, `named_link`): the links a KV cache or a cross-node collective takes,
by name, each as (bandwidth one direction GB/s, latency us) with its source; `named_link` applies
``BUS_EFFICIENCY`` to the bandwidth as `links_of` does. Bandwidths are the datasheets' signalling
rates per direction; latencies are one small message's time through the link and its software
(NCCL / UCX) as the cited measurements report them, rounded:

| name | GB/s one way | latency us | source |
|---|---|---|---|
| nvlink4 | 450 | 3 | H100 SXM datasheet "NVLink 900GB/s" (both directions); nccl-tests 8xH100 all_reduce busbw 460-480 GB/s at large sizes (alayanew.com NCCL-tests reference table); latency: NCCL point-to-point on NVLink, a few us (assumed 3) |
| nvlink5 | 900 | 3 | B200 datasheet "NVLink 1.8TB/s" (both directions); latency as nvlink4 (assumed) |
| ib-ndr | 50 | 5 | ConnectX-7 / Quantum-2 NDR 400 Gb/s per port = 50 GB/s (NVIDIA DGX H100 user guide: 8x single-port ConnectX-7, 400 Gb/s); latency: RDMA write ~2 us + software, assumed 5 |
| ib-xdr | 100 | 5 | ConnectX-8 SuperNIC / Quantum-X800 XDR 800 Gb/s per port = 100 GB/s (NVIDIA ConnectX-8 SuperNIC datasheet: "up to 800Gb/s"; AIConfigurator's b200_sxm.yaml and gb200.yaml: 100 GB/s per GPU "CX8 XDR 800Gb/s"); latency as ib-ndr (assumed) |
| roce-400g | 50 | 8 | 400GbE (Spectrum-X / ConnectX-7 Ethernet mode) 400 Gb/s = 50 GB/s; latency assumed 8 (Ethernet switch hops above IB's) |
| eth-100g | 12.5 | 20 | 100GbE: 100 Gb/s = 12.5 GB/s; latency assumed 20 (TCP stack) |
| pcie5 | 63 | 2 | PCIe 5.0 x16: 32 GT/s x 16 lanes x 128/130 = 63.0 GB/s per direction (PCI-SIG 5.0 spec); latency assumed 2 |

Where a latency says "assumed" it is not a measurement: a KV transfer of a long prompt is
bandwidth-bound (a 4096-token Llama-3.1-8B cache, 0.54 GB, takes 13 ms over ib-ndr), so the
assumed microseconds matter only for short prompts.
"""

from __future__ import annotations

from dataclasses import dataclass

from dispatchprof.sim.device import Device

SCALE_OUT_GB_PER_S = 50.0        # 400 Gb/s per GPU, one direction (DGX H100 user guide)
SCALE_OUT_LATENCY_US = 10.0      # assumed
BUS_EFFICIENCY = 0.8             # assumed share of link bandwidth reached by large NCCL collectives
GPUS_PER_NODE = 8                # DGX / HGX H100, H200, B200


@dataclass(frozen=True)
class Links:
    """The bandwidths (bytes/s, one direction, efficiency applied) and latencies (s) of one GPU."""

    scale_up_bps: float
    scale_up_latency_s: float
    scale_out_bps: float
    scale_out_latency_s: float

    def link(self, spans_nodes: bool, ranks_per_node: int = 1) -> tuple[float, float]:
        """(bytes/s, latency s) of a group inside one node (scale-up), or across nodes with
        ``ranks_per_node`` of its ranks on each node: min(scale-up, ranks_per_node x scale-out)."""
        if spans_nodes:
            return min(self.scale_up_bps, max(1, ranks_per_node) * self.scale_out_bps), self.scale_out_latency_s
        return self.scale_up_bps, self.scale_up_latency_s


def links_of(device: Device, scale_out_gb_per_s: float = SCALE_OUT_GB_PER_S) -> Links:
    """The links of ``device``; a ValueError when it has no interconnect figure."""
    if device.interconnect_gb_per_s is None:
        raise ValueError(f"parallelism over several devices needs an interconnect figure, and {device.name!r} has "
                         f"no interconnect_gb_per_s")
    return Links(device.interconnect_gb_per_s / 2 * 1e9 * BUS_EFFICIENCY, device.interconnect_latency_us * 1e-6,
                 scale_out_gb_per_s * 1e9 * BUS_EFFICIENCY, SCALE_OUT_LATENCY_US * 1e-6)


def ring_allreduce_latency_s(device: Device, n: int) -> float:
    """Seconds of latency of a small ring all-reduce over ``n`` devices like ``device``: its
    ``interconnect_latency_us`` (two devices, two ring steps) plus ``interconnect_step_us`` for each
    of the 2 (n-2) further steps (module docstring); 0 for one device."""
    return 0.0 if n <= 1 else (device.interconnect_latency_us + 2 * (n - 2) * device.interconnect_step_us) * 1e-6


def ring_gather_s(nbytes: float, n: int, bw: float, latency: float) -> float:
    """Seconds of a ring all-gather or reduce-scatter of a ``nbytes`` buffer over ``n`` ranks."""
    return 0.0 if n <= 1 or not nbytes else (n - 1) / n * nbytes / bw + latency


def ring_allreduce_s(nbytes: float, n: int, bw: float, latency: float) -> float:
    """Seconds of a ring all-reduce of ``nbytes`` over ``n`` ranks: a reduce-scatter + an all-gather."""
    return 0.0 if n <= 1 or not nbytes else 2 * (n - 1) / n * nbytes / bw + latency


def all_to_all_s(nbytes: float, n: int, bw: float, latency: float) -> float:
    """Seconds of an all-to-all over ``n`` ranks in which one rank sends ``nbytes`` in all (its
    1/n share to itself stays local): (n-1)/n * nbytes / bw + latency."""
    return 0.0 if n <= 1 or not nbytes else (n - 1) / n * nbytes / bw + latency


def send_s(nbytes: float, bw: float, latency: float) -> float:
    """Seconds of a point-to-point send (and its matching receive) of ``nbytes``."""
    return nbytes / bw + latency if nbytes else 0.0


#: name -> (bandwidth one direction GB/s, latency us); sources in the module docstring.
LINKS: dict[str, tuple[float, float]] = {
    "nvlink4": (450.0, 3.0),
    "nvlink5": (900.0, 3.0),
    "ib-ndr": (50.0, 5.0),
    "roce-400g": (50.0, 8.0),
    "eth-100g": (12.5, 20.0),
    "pcie5": (63.0, 2.0),
    "ib-xdr": (100.0, 5.0),
}


def named_link(name: str) -> tuple[float, float]:
    """(bytes/s one direction with ``BUS_EFFICIENCY`` applied, latency s) of a link of `LINKS`;
    a ValueError naming the known links otherwise."""
    if name not in LINKS:
        raise ValueError(f"unknown link {name!r}; known links: {', '.join(LINKS)}")
    gb_per_s, latency_us = LINKS[name]
    return gb_per_s * 1e9 * BUS_EFFICIENCY, latency_us * 1e-6
