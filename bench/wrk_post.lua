-- wrk script for the claudex benchmarks: POST the JSON body in $BENCH_BODY.
wrk.method = "POST"
wrk.body = os.getenv("BENCH_BODY")
wrk.headers["Content-Type"] = "application/json"
wrk.headers["anthropic-version"] = "2023-06-01"
