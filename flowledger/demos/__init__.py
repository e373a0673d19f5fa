"""Demo steps, one module per capability; `flowledger.demo.run_demo` runs them in order."""
