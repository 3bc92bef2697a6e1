"""What a transfer between GPUs of one node gets from the GPUs' own link, in words for a worked
step: a copy between two GPUs, and a collective over a group of them.

Through NVIDIA's NVSwitch (and over a PCIe card's one link) every peer is reached at the GPU's
whole interconnect figure, so both are that figure, one direction. On a mesh (AMD's MI300X:
one Infinity Fabric link to each of 7 peers, no switch) a copy between two GPUs crosses the
one link between them, 128 GB/s both ways = 64 GB/s each way, and a collective over n GPUs
reaches the other n − 1 over a link each: at best, its traffic spread evenly over them,
(n − 1) × 64 GB/s, all 7 links (448 GB/s) only over the whole 8-GPU node.
"""

from problems.arithmetic.catalog import Gpu
from problems.arithmetic.units import bandwidth_format
from problems.arithmetic.wording import count_phrase


def peer_link(gpu: Gpu) -> tuple[float, str]:
    """A copy from one GPU to another of its node, one direction (bytes/s), and how that
    follows from the catalog. H100 SXM: 450 GB/s ("NVLink 4: 900 GB/s both ways ÷ 2");
    MI300X: 64 GB/s (one of its 7 Infinity Fabric links, 128 GB/s both ways ÷ 2)."""
    rate = gpu.peer_one_way_bytes_per_second
    if not gpu.mesh_links:
        return rate, (f"{gpu.interconnect}: {bandwidth_format(gpu.interconnect_bytes_per_second)}"
                      " both ways ÷ 2")
    return rate, (f"{gpu.interconnect}: the one link between the two GPUs, "
                  f"{bandwidth_format(gpu.peer_link_bytes_per_second)} both ways ÷ 2 (the "
                  f"{bandwidth_format(gpu.interconnect_bytes_per_second)} is all "
                  f"{gpu.mesh_links} of a GPU's links, one to each peer, together)")


def collective_links(gpu: Gpu, gpus: int) -> tuple[float, str]:
    """Each GPU's bandwidth, one direction, in a collective over `gpus` GPUs of one node
    (bytes/s), and how, with no bracket (steps put it in one): NVLink 4 at any size, "at
    450 GB/s each way"; MI300X over 4 GPUs, 3 links × 64 GB/s = 192 GB/s "at best"."""
    rate = gpu.collective_one_way_bytes_per_second(gpus)
    if not gpu.mesh_links:
        return rate, f"{gpu.interconnect} at {bandwidth_format(rate)} each way"
    links = min(max(gpus - 1, 1), gpu.mesh_links)
    if links == 1:
        return rate, (f"{gpu.interconnect}, the one link between the two GPUs, at "
                      f"{bandwidth_format(rate)} each way")
    return rate, (f"{gpu.interconnect}, {links} links a GPU, one to each other GPU of the "
                  f"group, × {bandwidth_format(gpu.peer_one_way_bytes_per_second)} each way = "
                  f"{bandwidth_format(rate)} at best, the traffic spread evenly over them")


def interconnect_summary(gpu: Gpu) -> str:
    """The GPU's link as a comparison table gives it: "NVLink 4, 900 GB/s both directions";
    on a mesh, what one peer gets beside the total: "Infinity Fabric, 896 GB/s both
    directions over 7 links, 128 GB/s to any one peer"."""
    total = f"{gpu.interconnect}, {bandwidth_format(gpu.interconnect_bytes_per_second)} both " \
            "directions"
    if not gpu.mesh_links:
        return total
    return (f"{total} over {count_phrase(gpu.mesh_links, 'link')}, "
            f"{bandwidth_format(gpu.peer_link_bytes_per_second)} to any one peer")
