"""Links between GPUs and between machines, at their line rates in one direction.

Line rate is what the signalling carries before protocol overhead (headers, flow control), so an
achieved transfer is lower: the arithmetic applies an efficiency where it times a transfer.
NVLink figures live with each GPU (its datasheet's total for both directions); this catalog holds
the links that are not a GPU's own.
"""

from dataclasses import dataclass

GIGA = 10**9


@dataclass(frozen=True)
class Link:
    id: str
    name: str
    bytes_per_second: float  # one direction, line rate
    derivation: str  # how the figure follows from the standard's numbers
    source: str


def _pcie(gen: int, gigatransfers: float) -> Link:
    # 128b/130b encoding since Gen 3: 128 payload bits in every 130 sent; 16 lanes.
    rate = gigatransfers * GIGA * 16 * 128 / 130 / 8
    return Link(
        id=f"pcie-gen{gen}-x16", name=f"PCIe Gen{gen} x16", bytes_per_second=rate,
        derivation=f"{gigatransfers:g} GT/s per lane × 16 lanes × 128/130 encoding ÷ 8 bits",
        source="PCI-SIG, PCI Express Base Specification (Gen4: 16 GT/s, Gen5: 32 GT/s per lane)",
    )


LINKS: dict[str, Link] = {
    link.id: link
    for link in (
        _pcie(4, 16.0),
        _pcie(5, 32.0),
        Link(id="ib-ndr", name="InfiniBand NDR (400 Gb/s port)", bytes_per_second=400 * GIGA / 8,
             derivation="400 Gb/s ÷ 8 bits",
             source="NVIDIA ConnectX-7 / Quantum-2 datasheets: NDR, 400 Gb/s per port"),
        Link(id="eth-100g", name="100 Gigabit Ethernet", bytes_per_second=100 * GIGA / 8,
             derivation="100 Gb/s ÷ 8 bits", source="IEEE 802.3 (100GBASE), 100 Gb/s"),
    )
}

# The PCIe link between each GPU and its host, which GPUDirect RDMA to a network card crosses:
# a NIC faster than it cannot move a GPU's KV faster. From each GPU's datasheet (A100: "PCIe
# Gen4: 64 GB/s"; H100 SXM and PCIe, H200: "PCIe Gen5: 128 GB/s"; L40S and L4: "PCIe Gen4 x16";
# MI300X: "PCIe Gen 5 x16"), both directions together, so one direction is the x16 link's rate.
# B200 is left out: the course has no datasheet figure for its host link.
GPU_HOST_LINK: dict[str, str] = {
    "a100-80gb-sxm": "pcie-gen4-x16", "h100-sxm": "pcie-gen5-x16", "h100-pcie": "pcie-gen5-x16",
    "h200": "pcie-gen5-x16", "l40s": "pcie-gen4-x16", "l4": "pcie-gen4-x16",
    "mi300x": "pcie-gen5-x16",
}
# GPUs one NVLink (or Infinity Fabric) domain joins in the servers the catalog's GPUs ship in
# (HGX and DGX boards, MI300X platforms: eight). Beyond it, traffic crosses the network.
NODE_GPUS = 8
