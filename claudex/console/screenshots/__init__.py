"""`make screenshots`: the demo console driven through real states, saved as SVG and PNG.

    scenes.py    the states, one after another, and `main` (`python -m claudex.console.screenshots`)
    table.py     the provider table with 60 profiles, in an incident
    shooter.py   what takes each picture: the console settled, its SVG kept
"""
