wrk.method = "POST"
wrk.body = '{"name":"bench item","price":12.5}'
wrk.headers["Content-Type"] = "application/json"
