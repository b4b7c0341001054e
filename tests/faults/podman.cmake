# The Podman service killed during create and during a session, and a
# container killed mid-command, on both exec paths (issue 8). A private
# service in a scratch state root is started and killed; never the shared one.
sp_test(test_faults_podman SOURCES faults/test_faults_podman.c LABELS integration)
target_link_libraries(test_faults_podman PRIVATE Threads::Threads)
target_include_directories(test_faults_podman PRIVATE ${SP_SANDBOX_INTERNAL_DIRS})
set_tests_properties(test_faults_podman PROPERTIES TIMEOUT 900)
