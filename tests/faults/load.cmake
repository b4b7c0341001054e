# Load (issue 8): sandboxes created, used and removed in a loop, and one MCP
# session serving thousands of tool calls, with leaks checked (containers,
# processes, fds, the server's RSS). The long variants run ten times more
# and only with SANDPOD_LONG=1 in the environment (they skip otherwise):
#   SANDPOD_LONG=1 ctest -L long
sp_test(test_load SOURCES faults/test_load.c LABELS integration)
set_tests_properties(test_load PROPERTIES TIMEOUT 900)
add_test(NAME test_load_long COMMAND test_load --long)
set_tests_properties(test_load_long PROPERTIES LABELS "integration;long" SKIP_RETURN_CODE 77
                                              TIMEOUT 3600)
if(Python3_FOUND)
  add_test(NAME test_load_mcp
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/faults/test_load_mcp.py
                   $<TARGET_FILE:sandpod_cli>)
  set_tests_properties(test_load_mcp PROPERTIES LABELS integration SKIP_RETURN_CODE 77
                                                TIMEOUT 900)
  add_test(NAME test_load_mcp_long
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/faults/test_load_mcp.py
                   --long $<TARGET_FILE:sandpod_cli>)
  set_tests_properties(test_load_mcp_long PROPERTIES LABELS "integration;long"
                       SKIP_RETURN_CODE 77 TIMEOUT 3600)
endif()
