"""The pure scheduling brain: snapshot in, decisions out. No Django, no I/O."""
