"""The forwarding core: one request walked along its chain (DESIGN.md failure table and commit
rule). Nothing here knows of statistics, the journal, events or the fleet: those are addons
(`claudex.engine.addons`) called at the core's lifecycle hooks."""
