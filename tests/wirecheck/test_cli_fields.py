"""Options derived from the config dataclasses: no option and its field can drift."""

from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from wirecheck.acceptance import AcceptOptions
from wirecheck.cli import accept as accept_cli
from wirecheck.cli import sim as sim_cli
from wirecheck.cli._fields import Opt, add_fields, build
from wirecheck.sim import SimConfig, parse_faults


def _parse(register: object, argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    register(p.add_subparsers(dest="command"))  # type: ignore[operator]
    return p.parse_args(argv)


def test_sim_with_no_options_is_the_default_config() -> None:
    args = _parse(sim_cli.register, ["sim"])
    built = build(SimConfig, args, sim_cli.FIELDS | sim_cli.CAPACITY_FIELDS, faults=parse_faults(""))
    assert dataclasses.asdict(built) == dataclasses.asdict(SimConfig())


def test_sim_options_reach_their_fields() -> None:
    argv = ["sim", "--num-gpu-blocks", "400", "--no-prefix-caching", "--no-tool-parser", "--hybrid-cache"]
    argv += [
        "--time-scale",
        "0.05",
        "--oom-at-tokens",
        "9000",
        "--family",
        "kimi_k2",
        "--dialect",
        "vllm-0.15",
    ]
    cfg = build(SimConfig, _parse(sim_cli.register, argv), sim_cli.FIELDS | sim_cli.CAPACITY_FIELDS)
    assert (cfg.num_gpu_blocks, cfg.enable_prefix_caching, cfg.tool_parser, cfg.hybrid_cache) == (
        400,
        False,
        False,
        True,
    )
    assert (cfg.time_scale, cfg.oom_at_tokens, cfg.family, cfg.dialect) == (
        0.05,
        9000,
        "kimi_k2",
        "vllm-0.15",
    )


def test_accept_with_only_the_required_options_is_the_default_options(tmp_path: Path) -> None:
    args = _parse(
        accept_cli.register, ["accept", "--target", "http://t", "--reviewer", "r", "--out", str(tmp_path)]
    )
    got = accept_cli.options(args)
    want = AcceptOptions(target="http://t", reviewer="r", out=tmp_path)
    assert dataclasses.asdict(got) == dataclasses.asdict(want)


def test_accept_list_options_repeat_and_take_several_values(tmp_path: Path) -> None:
    for name in ("a.xml", "b.xml", "c.xml", "n0.log", "n1.log"):  # accept checks its evidence files exist
        (tmp_path / name).write_text("x")
    f = {name: str(tmp_path / name) for name in ("a.xml", "b.xml", "c.xml", "n0.log", "n1.log")}
    argv = ["accept", "--target", "t", "--reviewer", "r", "--out", str(tmp_path), "--seed", "4"]
    argv += ["--host-info", f["a.xml"], f["b.xml"], "--host-info", f["c.xml"]]
    argv += ["--ack-warning", "x", "--ack-warning", "y", "--official-image", "--on-call", "sre"]
    argv += ["--startup-log", f["n0.log"], f["n1.log"]]
    got = accept_cli.options(_parse(accept_cli.register, argv))
    assert got.host_files == [f["a.xml"], f["b.xml"], f["c.xml"]] and got.ack_warnings == ["x", "y"]
    assert got.startup_log == f["n0.log"] and got.more_startup_logs == [f["n1.log"]]
    assert (got.official_image, got.seed, got.limits.owner) == (True, 4, "sre")


def test_the_required_fields_are_required_options(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        _parse(accept_cli.register, ["accept", "--out", "o"])
    assert "--target" in capsys.readouterr().err


@dataclass
class _Odd:
    on: bool = True
    pairs: dict[str, str] = field(default_factory=dict)


def test_a_field_with_no_command_line_form_is_refused_when_the_parser_is_built() -> None:
    p = argparse.ArgumentParser()
    with pytest.raises(TypeError, match="--no-"):
        add_fields(p, _Odd, {"on": Opt()})
    with pytest.raises(TypeError, match="no command-line form"):
        add_fields(p, _Odd, {"pairs": Opt()})
    add_fields(p, _Odd, {"on": Opt(flag="--no-on")})
    assert p.parse_args(["--no-on"]).on is False and p.parse_args([]).on is True
