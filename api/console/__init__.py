"""The ops console: server-rendered pages for operators, signed in with an admin key."""
