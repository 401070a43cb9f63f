"""Route A: one `prefect.serve` process with the four deployments (what `honesteval serve`
runs). Usage: python deployments/serve.py PROJECT_DIR [CRON]"""

import sys

from honesteval.orchestration.serving import DEFAULT_CRON, serve

if __name__ == "__main__":
    serve(sys.argv[1], cron=sys.argv[2] if len(sys.argv) > 2 else DEFAULT_CRON)
