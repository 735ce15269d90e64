"""t2t-lite-serve: trained models behind HTTP. served_model.py runs one model with per-request
options as the decoder does; batcher.py groups concurrent requests into batches on one worker
thread; app.py is the FastAPI application (JSON API, limits, the web page, page.html)."""
