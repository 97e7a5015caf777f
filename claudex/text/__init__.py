"""How claudex words what it shows, the same for the command line and the console: costs
(`cost`), token usage (`usage`), the request history and a request's detail (`history`), quota
windows (`windows`) and `claudex status`'s table (`status`).

Below the console and the CLI, above the engine: these modules read the engine's JSON and
records and return text (or rich renderables), and import nothing of the console, the server or
the command line.
"""
