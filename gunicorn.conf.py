# gunicorn reads this file from the working directory (the repository root) by default.
# Only the logger is set here: every other setting stays on the command line (README).
# Its handlers escape control characters, so no request can forge a log line.
logger_class = "omniroute_admin.gunicorn_logging.EscapingLogger"
