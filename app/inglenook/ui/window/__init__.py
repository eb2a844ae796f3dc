"""The window's frame: commands and menus, the Shortcuts sheet, About."""
