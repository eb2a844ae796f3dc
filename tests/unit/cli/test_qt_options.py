"""Qt's own command-line options reach Qt; ours reach our parser."""

from inglenook.cli import split_qt_options


def test_qt_options_are_split_from_ours() -> None:
    ours, qt = split_qt_options(["-platform", "offscreen", "-style=Fusion", "-reverse",
                                 "--self-test"])
    assert ours == ["--self-test"]
    assert qt == ["-platform", "offscreen", "-style=Fusion", "-reverse"]
    assert split_qt_options(["chat", "-", "--temperature", "0"]) == (
        ["chat", "-", "--temperature", "0"], [])
