/* The API's VM operations in production: straight calls into the KVM runtime (vm.h) and the
 * config checks (config.h). Tests substitute their own struct api_vm_ops. */
#include "api/api_internal.h"
#include "devices.h"

const struct api_vm_ops api_vm_ops_kvm = {
    .create = vm_create,
    .boot = vm_boot,
    .pause = vm_pause,
    .resume = vm_resume,
    .shutdown = vm_shutdown,
    .reboot = vm_reboot,
    .destroy = vm_destroy,
    .wait = vm_wait,
    .get_state = vm_get_state,
    .get_config = vm_get_config,
    .memory_actual = vm_memory_actual,
    .get_counters = vm_get_counters,
    .console_stats = vm_console_stats,
    .add_vnvme = vm_add_vnvme,
    .add_disk = vm_add_disk,
    .add_fs = vm_add_fs,
    .add_vsock = vm_add_vsock,
    .add_net = vm_add_net,
    .add_device = vm_add_device,
    .remove_device = vm_remove_device,
    .device_slot = devices_slot,
    .snapshot = vm_snapshot,
    .restore = vm_restore,
    .migrate_send = vm_migrate_send,
    .migrate_receive = vm_migrate_receive,
    .defaults = config_defaults,
    .validate = config_validate,
    .check_path = fsutil_check,
};
