"""Code the tests (and the benchmarks) share: real agent messages and session files
(`agent_messages`, `session_helpers`), the repository's fixture files
(`fixture_paths`), an appending agent process (`agent_simulator`), the real upstream
agents pi and omp (`real_agents`) and the fake model server they talk to
(`fake_model_server`), the real-mount harness (`mount`) and the write tests' setup and
readers (`write_setup`, `write_helpers`). Imported as ``support.<module>`` (``tests`` is
on pytest's path)."""
