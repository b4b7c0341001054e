# SIGKILL at many moments of a large write, a snapshot and a restore (the
# CLI and the library), and 100 concurrent tool calls on one sandbox
# (issue 8). Included from tests/CMakeLists.txt.
sp_test(test_faults_kill SOURCES faults/test_faults_kill.c LABELS "integration;security")
target_compile_definitions(test_faults_kill PRIVATE SANDPOD_CLI="$<TARGET_FILE:sandpod_cli>")
add_dependencies(test_faults_kill sandpod_cli)
set_tests_properties(test_faults_kill PROPERTIES TIMEOUT 600)
add_test(NAME test_faults_kill_parallel COMMAND test_faults_kill parallel)
set_tests_properties(test_faults_kill_parallel PROPERTIES LABELS "integration;security"
                                                        SKIP_RETURN_CODE 77 TIMEOUT 900)
# The long variant: many more kills; skips unless SANDPOD_LONG=1.
add_test(NAME test_faults_kill_long COMMAND test_faults_kill long)
set_tests_properties(test_faults_kill_long PROPERTIES LABELS "integration;security;long"
                                                    SKIP_RETURN_CODE 77 TIMEOUT 3600)
