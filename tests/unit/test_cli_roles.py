"""The one `padbench` command (padbench.cli): every role's commands, and a clear message for a missing extra."""

from __future__ import annotations

import argparse
import builtins
import importlib
import types
from pathlib import Path

import pytest

from padbench import __version__, cli


def registered_commands(register: types.FunctionType) -> set[str]:
    subparsers = argparse.ArgumentParser().add_subparsers()
    register(subparsers)
    return set(subparsers.choices)


@pytest.mark.parametrize("role", cli.ROLES, ids=lambda role: role.module)
def test_each_role_lists_the_commands_it_registers(role: cli.Role) -> None:
    assert registered_commands(importlib.import_module(role.module).register) == set(role.commands)


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["--version"])
    assert exit_info.value.code == 0 and capsys.readouterr().out.strip() == f"padbench {__version__}"


def role_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, imports: str) -> str:
    """A role module that imports `imports` at the top, as a role's cli module imports its dependencies."""
    (tmp_path / f"{name}.py").write_text(f"import {imports}\n\ndef register(subparsers):\n    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    return name


def test_a_missing_extra_names_the_extra_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    # As on a client-only install: the server role's dependency is not there.
    module = role_module(tmp_path, monkeypatch, "server_role_without_its_extra", "a_dependency_not_installed")
    monkeypatch.setattr(cli, "ROLES", (cli.Role(module, "server", ("server", "db")),
                                       *[role for role in cli.ROLES if role.extra is None]))
    assert cli.main(["server", "--port", "9000"]) == 2
    message = capsys.readouterr().err
    assert "padbench server: needs the 'server' extra (a_dependency_not_installed is not installed)" in message
    assert "pip install 'padbench[server]'" in message
    assert cli.main(["db", "upgrade"]) == 2  # every command of the role says so, whatever its arguments


def test_a_broken_base_install_is_not_blamed_on_an_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    module = role_module(tmp_path, monkeypatch, "client_role_without_httpx", "a_dependency_not_installed")
    monkeypatch.setattr(cli, "ROLES", (cli.Role(module, None, ("submit",)),))
    with pytest.raises(ModuleNotFoundError):
        cli.build_parser()


def test_a_spec_check_without_the_worker_extra_names_it(monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    # `padbench check` is the top's (the gate needs only the base install): its spec checker says what is missing.
    real_import = builtins.__import__

    def without_torch(name: str, *args: object, **kwargs: object) -> object:
        if name == "padbench.worker.cli.check":
            raise ModuleNotFoundError("No module named 'torch'", name="torch")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", without_torch)
    assert cli.main(["check", "spec.yaml"]) == 2
    assert "padbench check: needs the 'worker' extra (torch is not installed)" in capsys.readouterr().err
