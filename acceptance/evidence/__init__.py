"""The environment evidence a reviewer hands to ``accept``, read into plain facts: ``nvidia-smi`` (XML
and plain) per host, ``wirecheck probe`` JSON from the container, the vLLM startup log (and its
warnings judged by kind), ``nvidia-smi topo -m`` per node, and vLLM's version strings.

Every reader takes a file and returns facts; a file it cannot read is an ``InputError`` that names the
file and what was expected. ``probe`` is the standalone script that gathers the container's facts.
"""

from ._container import ContainerFacts, read_container
from ._files import SIM_MARKER, read_text
from ._host import GpuFacts, HostFacts, read_host
from ._probe import probe, probe_script
from ._startup import StartupLog, read_startup_log
from ._topology import TopoFacts, group_nodes, interconnect, read_topo, topology
from ._versions import parse_fingerprint, parse_version, version_at_least
from ._warnings import ANSI, DANGEROUS, PREFIX, Danger, Judged, clean_line, judge

__all__ = [
    "ANSI",
    "DANGEROUS",
    "PREFIX",
    "SIM_MARKER",
    "ContainerFacts",
    "Danger",
    "GpuFacts",
    "HostFacts",
    "Judged",
    "StartupLog",
    "TopoFacts",
    "clean_line",
    "group_nodes",
    "interconnect",
    "judge",
    "parse_fingerprint",
    "parse_version",
    "probe",
    "probe_script",
    "read_container",
    "read_host",
    "read_startup_log",
    "read_text",
    "read_topo",
    "topology",
    "version_at_least",
]
