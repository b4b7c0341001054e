# Disk faults (issue 8): a full tmpfs and read-only folders under every write
# path (sp_fs writes, apply_patch, hydration, sandbox creation, snapshots,
# restores). Needs root to mount; skips otherwise, fails under CI=true.
sp_test(test_faults_disk SOURCES faults/test_faults_disk.c LABELS "unit;security")
set_tests_properties(test_faults_disk PROPERTIES TIMEOUT 300)
