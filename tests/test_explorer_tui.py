"""The TUI on a Neuron Explorer profile: the overview says which schema version was read, `d` opens the device
view (Summary metrics, OpcodeSummary, device time per framework op / source line / host op), and a hardware
error finding leads there. Driven with Pilot at 80x24 and 160x48."""

from __future__ import annotations

from pathlib import Path

import pytest

from neuron_prof.tui.app import NeuronProfApp
from tests._tui_pilot import ready, screen_text, shown, table
from tests.fakes.explorer_profile import USER_FILE, write_profile
from tests.fakes.explorer_schema import documented, evolve


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    f = tmp_path_factory.mktemp("tui") / "p"
    write_profile(f, version="12.0.1", schema=evolve(documented(), drop={"CcOp": ["replica_group"]}))
    return f


@pytest.mark.parametrize("size", [(80, 24), (160, 48)])
async def test_device_view_shows_the_profile(folder: Path, size: tuple[int, int]) -> None:
    app = NeuronProfApp([str(folder)])
    async with app.run_test(size=size) as pilot:
        await ready(pilot, app)
        assert "schema 12.0.1 (SchemaFields)" in screen_text(app)
        await pilot.press("d")
        await pilot.pause()
        assert app.current_mode == "device"
        text = screen_text(app)
        assert "Neuron Explorer schema 12.0.1" in text and "MFU" in text and "41.5%" in text
        t = table(app)
        what = shown(t, "what")
        assert "opcode tensor" in what and "framework op" in what and "source line" in what and "host op" in what
        names = shown(t, "name")
        assert "MATMUL" in names and f"{USER_FILE}:12" in names and "MLP[0]/Linear[0]/aten.mm" in names
        await pilot.press("1")
        await pilot.pause()
        assert app.current_mode == "overview"


async def test_a_hardware_error_finding_opens_the_device_view(folder: Path) -> None:
    app = NeuronProfApp([str(folder)])
    async with app.run_test(size=(160, 48)) as pilot:
        await ready(pilot, app)
        t = table(app)
        row = shown(t, "kind").index("device_error")
        t.move_to(row)
        await pilot.press("enter")
        await pilot.pause()
        assert app.current_mode == "device"


async def test_device_view_of_a_system_profile_alone(tmp_path: Path) -> None:
    """No device profile: no Summary metrics, but the executions' time per op that launched them."""
    write_profile(tmp_path / "p", device=False)
    app = NeuronProfApp([str(tmp_path / "p")])
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot, app)
        await pilot.press("d")
        await pilot.pause()
        assert app.current_mode == "device" and "MFU" not in screen_text(app)
        assert set(shown(table(app), "what")) == {"your line"}
        assert set(shown(table(app), "name")) == {"aten::mm#0", "aten::mm#1", "aten::mm#2"}
