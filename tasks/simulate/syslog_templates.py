# ruff: noqa: E501  (log message templates are long literal lines, kept verbatim)
"""Syslog message templates (a few hundred) with heavy-tailed (Zipf) background frequencies.

Placeholders: {a} {b} {c} integers, {h} hex, {u} user, {uid} uid, {ip} IPv4, {n} node name, {j} job id.
Each template is (app, facility, severity, format). Facilities/severities follow RFC 5424 §6.2.1.
"""

from __future__ import annotations

KERN, USER, DAEMON, AUTH, SYSLOG, CRON, AUTHPRIV, LOCAL0 = 0, 1, 3, 4, 5, 9, 10, 16
EMERG, ALERT, CRIT, ERR, WARNING, NOTICE, INFO, DEBUG = range(8)

_UNITS = [
    ("dnf-makecache.service", "dnf makecache"), ("systemd-tmpfiles-clean.service", "Cleanup of Temporary Directories"),
    ("sysstat-collect.service", "system activity accounting tool"), ("logrotate.service", "Rotate log files"),
    ("man-db-cache-update.service", "man-db-cache-update.service"), ("unbound-anchor.service", "update of the root trust anchor"),
    ("nhc.service", "LBNL Node Health Check"), ("slurmd.service", "Slurm node daemon"), ("munge.service", "MUNGE authentication service"),
    ("chronyd.service", "NTP client/server"), ("sshd.service", "OpenSSH server daemon"), ("rsyslog.service", "System Logging Service"),
    ("crond.service", "Command Scheduler"), ("irqbalance.service", "irqbalance daemon"), ("tuned.service", "Dynamic System Tuning Daemon"),
    ("lustre-client.service", "Lustre client"), ("nfs-client.target", "NFS client services"), ("rdma.service", "RDMA Node Service"),
    ("opensm.service", "OpenSM InfiniBand subnet manager"), ("ipmievd.service", "IPMI event daemon"), ("smartd.service", "Self Monitoring and Reporting Technology"),
    ("auditd.service", "Security Auditing Service"), ("dbus-broker.service", "D-Bus System Message Bus"), ("NetworkManager.service", "Network Manager"),
    ("systemd-logind.service", "User Login Management"), ("kdump.service", "Crash recovery kernel arming"), ("nvidia-persistenced.service", "NVIDIA Persistence Daemon"),
    ("node_exporter.service", "Prometheus node exporter"), ("examon.service", "ExaMon collector agent"), ("ldmsd.service", "LDMS sampler daemon"),
    ("telegraf.service", "Telegraf agent"), ("autofs.service", "Automounts filesystems on demand"), ("sssd.service", "System Security Services Daemon"),
    ("rasdaemon.service", "RAS daemon to log the RAS events"), ("mcelog.service", "Machine Check Exception Logging Daemon"),
    ("fstrim.service", "Discard unused blocks on filesystems"), ("raid-check.service", "RAID setup health check"),
    ("systemd-journal-flush.service", "Flush Journal to Persistent Storage"), ("user@{uid}.service", "User Manager for UID {uid}"),
    ("session-{a}.scope", "Session {a} of User {u}"),
]

BACKGROUND: list[tuple[str, int, int, str]] = []
for _unit, _desc in _UNITS:
    BACKGROUND += [
        ("systemd", DAEMON, INFO, f"Starting {_desc}..."),
        ("systemd", DAEMON, INFO, f"Started {_desc}."),
        ("systemd", DAEMON, INFO, f"{_unit}: Deactivated successfully."),
        ("systemd", DAEMON, INFO, f"Finished {_desc}."),
        ("systemd", DAEMON, INFO, f"{_unit}: Consumed {{a}}ms CPU time."),
    ]
BACKGROUND += [
    ("sshd", AUTHPRIV, INFO, "Accepted publickey for {u} from {ip} port {b} ssh2: RSA SHA256:{h}"),
    ("sshd", AUTHPRIV, INFO, "pam_unix(sshd:session): session opened for user {u}(uid={uid}) by {u}(uid=0)"),
    ("sshd", AUTHPRIV, INFO, "pam_unix(sshd:session): session closed for user {u}"),
    ("sshd", AUTHPRIV, INFO, "Received disconnect from {ip} port {b}:11: disconnected by user"),
    ("sshd", AUTHPRIV, INFO, "Disconnected from user {u} {ip} port {b}"),
    ("sshd", AUTHPRIV, INFO, "Connection closed by authenticating user root {ip} port {b} [preauth]"),
    ("sshd", AUTHPRIV, INFO, "Invalid user admin{a} from {ip} port {b}"),
    ("sshd", AUTHPRIV, ERR, "error: kex_exchange_identification: Connection closed by remote host"),
    ("sshd", AUTHPRIV, INFO, "Connection reset by {ip} port {b} [preauth]"),
    ("sshd", AUTHPRIV, NOTICE, "pam_slurm_adopt(sshd:account): Ignoring root user"),
    ("sshd", AUTHPRIV, INFO, "pam_slurm_adopt(sshd:account): Process {a} adopted into job {j}"),
    ("CROND", CRON, INFO, "(root) CMD (/usr/lib64/sa/sa1 1 1)"),
    ("CROND", CRON, INFO, "(root) CMD (run-parts /etc/cron.hourly)"),
    ("CROND", CRON, INFO, "(root) CMD (/usr/sbin/nhc -t 60 > /dev/null 2>&1)"),
    ("CROND", CRON, INFO, "(root) CMDEND (/usr/lib64/sa/sa1 1 1)"),
    ("anacron", CRON, INFO, "Job `cron.daily' terminated"),
    ("anacron", CRON, INFO, "Normal exit ({a} jobs run)"),
    ("chronyd", DAEMON, INFO, "Selected source {ip} (ntp{c}.example.org)"),
    ("chronyd", DAEMON, WARNING, "System clock wrong by 0.{a} seconds"),
    ("chronyd", DAEMON, INFO, "Source {ip} replaced with {ip}"),
    ("chronyd", DAEMON, WARNING, "Forward time jump detected!"),
    ("rsyslogd", SYSLOG, INFO, "imjournal: journal files changed, reloading...  [v8.2310.0-4.el9 try https://www.rsyslog.com/e/0 ]"),
    ("rsyslogd", SYSLOG, WARNING, "action 'action-0-builtin:omfwd' suspended (module 'builtin:omfwd'), retry 0."),
    ("rsyslogd", SYSLOG, INFO, "action 'action-0-builtin:omfwd' resumed (module 'builtin:omfwd')"),
    ("systemd-logind", AUTH, INFO, "New session {a} of user {u}."),
    ("systemd-logind", AUTH, INFO, "Session {a} logged out. Waiting for processes to exit."),
    ("systemd-logind", AUTH, INFO, "Removed session {a}."),
    ("munged", DAEMON, INFO, "Purged {a} credentials from replay hash"),
    ("munged", DAEMON, ERR, "Unauthorized credential for client UID={uid} GID={uid}"),
    ("kernel", KERN, WARNING, "perf: interrupt took too long ({a} > {b}), lowering kernel.perf_event_max_sample_rate to {c}"),
    ("kernel", KERN, INFO, "mlx5_core 0000:3b:00.0: mlx5_fw_tracer_handle_traces:740:(pid {a}): FW tracer: {h}"),
    ("kernel", KERN, WARNING, "TCP: request_sock_TCP: Possible SYN flooding on port {b}. Sending cookies."),
    ("kernel", KERN, INFO, "IPv6: ADDRCONF(NETDEV_CHANGE): ib0: link becomes ready"),
    ("kernel", KERN, NOTICE, "audit: type=1130 audit({a}.{c}:{b}): pid=1 uid=0 auid=4294967295 ses=4294967295 msg='unit=sysstat-collect'"),
    ("kernel", KERN, INFO, "device-mapper: uevent: version 1.0.3"),
    ("kernel", KERN, WARNING, "hrtimer: interrupt took {a} ns"),
    ("kernel", KERN, INFO, "Lustre: scratch-OST{c:04x}-osc-ffff{h}: Connection restored to 10.20.{c}.{b} @o2ib"),
    ("kernel", KERN, WARNING, "Lustre: scratch-MDT0000-mdc-ffff{h}: Connection to scratch-MDT0000 (at 10.20.0.1@o2ib) was lost"),
    ("kernel", KERN, ERR, "LustreError: 11-0: scratch-OST{c:04x}-osc-ffff{h}: operation ost_connect to node 10.20.{c}.{b}@o2ib failed: rc = -16"),
    ("kernel", KERN, INFO, "nfs: server nfs01 OK"),
    ("kernel", KERN, INFO, "pcieport 0000:00:03.0: AER: Corrected error received: 0000:00:03.0"),
    ("kernel", KERN, WARNING, "EDAC skx MC{c}: HANDLING MCE MEMORY ERROR"),
    ("kernel", KERN, INFO, "EDAC MC{c}: 1 CE memory read error on CPU_SrcID#{c}_MC#0_Chan#{a}_DIMM#0 (channel:{a} slot:0 page:0x{h})"),
    ("slurmd", DAEMON, INFO, "error: Unable to register: Unable to contact slurm controller (connect failure)"),
    ("slurmd", DAEMON, INFO, "Considering each NUMA node as a socket"),
    ("slurmd", DAEMON, INFO, "CPU frequency setting not configured for this node"),
    ("slurmd", DAEMON, INFO, "_handle_stray_script: Purging vestigial job script /var/spool/slurmd/job{j}/slurm_script"),
    ("smartd", DAEMON, INFO, "Device: /dev/nvme0, SMART Usage Attribute: 194 Temperature_Celsius changed from {a} to {b}"),
    ("smartd", DAEMON, INFO, "Device: /dev/sda [SAT], state written to /var/lib/smartmontools/smartd.state"),
    ("nhc", LOCAL0, INFO, "Node Health Check starting."),
    ("nhc", LOCAL0, INFO, "Node Health Check completed successfully ({a}s)."),
    ("telegraf", DAEMON, ERR, "E! [outputs.influxdb] When writing to [http://mon01:8086]: Post \"http://mon01:8086/write\": context deadline exceeded"),
    ("dbus-broker-launch", DAEMON, NOTICE, "Service file '/usr/share/dbus-1/system-services/org.freedesktop.nm_dispatcher.service' is not named after the D-Bus name"),
    ("NetworkManager", DAEMON, INFO, "<info>  [{a}.{c}] dhcp4 (eno1): state changed new lease, address=10.10.{c}.{b}"),
    ("auditd", DAEMON, NOTICE, "Audit daemon rotating log files"),
    ("sssd_be", AUTHPRIV, WARNING, "Backend is offline"),
    ("sssd_be", AUTHPRIV, INFO, "Backend is online"),
    ("rasdaemon", DAEMON, INFO, "rasdaemon: ras:mc_event event enabled"),
    ("ipmievd", DAEMON, INFO, "Reading sensors"),
    ("automount", DAEMON, INFO, "mounted /home/{u} from nfs01:/export/home/{u}"),
    ("automount", DAEMON, INFO, "expired /home/{u}"),
    ("sudo", AUTHPRIV, NOTICE, "     root : PWD=/root ; USER=root ; COMMAND=/usr/sbin/nhc"),
    ("su", AUTHPRIV, INFO, "(to root) root on none"),
    ("lldpad", DAEMON, WARNING, "recvfrom(Event interface): No buffer space available"),
]

# Event templates keyed by purpose (not part of the background mix).
EVENT: dict[str, list[tuple[str, int, int, str]]] = {
    "job_start": [
        ("slurmd", DAEMON, INFO, "launch task StepId={j}.0 request from UID:{uid} GID:{uid} HOST:10.10.{c}.{b} PORT:{a}"),
        ("slurmd", DAEMON, INFO, "task/affinity: lllp_distribution: JobId={j} manual binding: none,one_thread"),
        ("slurmstepd", DAEMON, INFO, "[{j}.extern] task/cgroup: _memcg_initialize: job: alloc=245760MB mem.limit=245760MB"),
    ],
    "job_end": [
        ("slurmstepd", DAEMON, INFO, "[{j}.0] done with job"),
        ("slurmstepd", DAEMON, INFO, "[{j}.extern] done with job"),
    ],
    "oom": [
        ("kernel", KERN, WARNING, "{name} invoked oom-killer: gfp_mask=0xcc0(GFP_KERNEL), order=0, oom_score_adj=0"),
        ("kernel", KERN, ERR, "Memory cgroup out of memory: Killed process {a} ({name}) total-vm:{b}kB, anon-rss:{c}kB, file-rss:0kB, shmem-rss:0kB, UID:{uid} pgtables:{a}kB oom_score_adj:0"),
        ("slurmstepd", DAEMON, ERR, "error: Detected 1 oom_kill event in StepId={j}.batch. Some of the step tasks have been OOM Killed."),
    ],
    "memory_leak": [
        ("kernel", KERN, ERR, "Out of memory: Killed process {a} (ldmsd) total-vm:{b}kB, anon-rss:{c}kB, file-rss:0kB, shmem-rss:0kB, UID:0 pgtables:{a}kB oom_score_adj:0"),
    ],
    "thermal_fan_failure": [
        ("kernel", KERN, WARNING, "CPU{c}: Core temperature above threshold, cpu clock throttled (total events = {a})"),
        ("kernel", KERN, WARNING, "CPU{c}: Package temperature above threshold, cpu clock throttled (total events = {a})"),
        ("ipmievd", DAEMON, WARNING, "Fan FAN{c} Lower Critical going low  Asserted Reading 0 < Threshold 600 RPM"),
    ],
    "network_degradation": [
        ("kernel", KERN, WARNING, "mlx5_core 0000:3b:00.0: mlx5_port_module_event:1133:(pid 0): Port module event[error]: module 0, Cable error, Bus stuck"),
        ("kernel", KERN, WARNING, "ib0: transmit timeout: latency {a} msecs"),
        ("kernel", KERN, ERR, "LNetError: {a}:0:(o2iblnd_cb.c:3373:kiblnd_check_txs_locked()) Timed out tx: tx_queue, {b} seconds"),
    ],
    "disk_slowdown": [
        ("kernel", KERN, WARNING, "nfs: server nfs01 not responding, still trying"),
        ("kernel", KERN, ERR, "INFO: task {name}:{a} blocked for more than 120 seconds."),
        ("kernel", KERN, ERR, "LustreError: {a}:0:(client.c:1276:ptlrpc_import_delay_req()) @@@ IMP_CLOSED  req@ffff{h} x{b}/t0(0) o101->scratch-OST{c:04x}-osc"),
    ],
    "misconfiguration": [
        ("slurmd", DAEMON, ERR, "error: Node configuration differs from hardware: CPUs=64:128(hw) Boards=1:1(hw) SocketsPerBoard=2:2(hw) CoresPerSocket=32:32(hw) ThreadsPerCore=1:2(hw)"),
        ("slurmd", DAEMON, ERR, "error: slurm.conf hash value 0x{h} differs from slurmctld"),
    ],
    "cpu_hog": [
        ("kernel", KERN, INFO, "sched: RT throttling activated"),
        ("nhc", LOCAL0, ERR, "NHC: check_ps_unauth_users:  Unauthorized process {a} owned by {u} ({name}) found"),
    ],
    "edac_burst": [
        ("kernel", KERN, WARNING, "EDAC MC{c}: 1 CE memory read error on CPU_SrcID#{c}_MC#0_Chan#{a}_DIMM#0 (channel:{a} slot:0 page:0x{h} offset:0x0 grain:32 syndrome:0x0 - area:DRAM err_code:0000:009f socket:{c} ha:0 channel_mask:2 rank:1)"),
        ("kernel", KERN, WARNING, "mce: [Hardware Error]: Machine check events logged"),
        ("rasdaemon", DAEMON, WARNING, "rasdaemon: mc_event: 1 Corrected error: memory read error on DIMM_A{a}"),
    ],
    "mce_thermal": [
        ("kernel", KERN, WARNING, "mce: CPU{c}: Package temperature above threshold, cpu clock throttled (total events = {a})"),
        ("kernel", KERN, ERR, "mce: [Hardware Error]: CPU {c}: Machine Check: 0 Bank 5: be00000000800400"),
        ("mcelog", DAEMON, ERR, "Processor {c} heated above trip temperature. Throttling enabled."),
    ],
    "soft_lockup": [
        ("kernel", KERN, EMERG, "watchdog: BUG: soft lockup - CPU#{c} stuck for {a}s! [{name}:{b}]"),
        ("kernel", KERN, ERR, "rcu: INFO: rcu_sched self-detected stall on CPU"),
        ("kernel", KERN, ERR, "INFO: task kworker/{c}:1:{b} blocked for more than 120 seconds."),
    ],
    "ib_errors": [
        ("kernel", KERN, WARNING, "mlx5_core 0000:3b:00.0: mlx5_ib_event:3021:(pid {a}): port 1 link down"),
        ("kernel", KERN, INFO, "mlx5_core 0000:3b:00.0: mlx5_ib_event:3021:(pid {a}): port 1 link up"),
        ("kernel", KERN, ERR, "LNetError: {a}:0:(o2iblnd_cb.c:2637:kiblnd_passive_connect()) Can't accept conn from 10.20.{c}.{b}@o2ib"),
    ],
    "psu_fluctuation": [
        ("ipmievd", DAEMON, CRIT, "Power Supply PS{c} Power Supply AC lost Asserted"),
        ("ipmievd", DAEMON, WARNING, "Power Supply PS{c} Redundancy Lost Asserted"),
        ("kernel", KERN, WARNING, "ACPI: \\_SB_.PMI0: Power meter threshold exceeded"),
    ],
    "io_errors": [
        ("kernel", KERN, ERR, "blk_update_request: I/O error, dev nvme0n1, sector {b} op 0x1:(WRITE) flags 0x800 phys_seg 1 prio class 0"),
        ("kernel", KERN, ERR, "nvme nvme0: I/O {a} QID {c} timeout, aborting"),
        ("kernel", KERN, CRIT, "EXT4-fs error (device nvme0n1p2): ext4_find_entry:1455: inode #{b}: comm {name}: reading directory lblock 0"),
    ],
    "inlet_heating": [
        ("ipmievd", DAEMON, WARNING, "Temperature Inlet Temp Upper Non-critical going high Asserted Reading {a} > Threshold 35 degrees C"),
        ("kernel", KERN, WARNING, "CPU{c}: Package temperature above threshold, cpu clock throttled (total events = {b})"),
    ],
    "crash": [
        ("kernel", KERN, EMERG, "Kernel panic - not syncing: Fatal exception"),
        ("kernel", KERN, EMERG, "EDAC MC{c}: 1 UE memory read error on CPU_SrcID#{c}_MC#0_Chan#{a}_DIMM#0 (channel:{a} slot:0 page:0x{h})"),
        ("kernel", KERN, EMERG, "mce: [Hardware Error]: PROCESSOR 0:606a6 TIME {b} SOCKET {c} APIC 0 microcode d0003a5"),
    ],
    "shutdown": [
        ("systemd", DAEMON, INFO, "Stopping Slurm node daemon..."),
        ("slurmd", DAEMON, INFO, "Slurmd shutdown completing"),
        ("systemd-shutdown", DAEMON, INFO, "Syncing filesystems and block devices."),
        ("systemd-shutdown", DAEMON, INFO, "Sending SIGTERM to remaining processes..."),
    ],
    "boot": [
        ("kernel", KERN, NOTICE, "Linux version 5.14.0-427.13.1.el9_4.x86_64 (mockbuild@x64-builder02.almalinux.org) (gcc (GCC) 11.4.1 20231218 (Red Hat 11.4.1-3), GNU ld version 2.35.2-43.el9) #1 SMP PREEMPT_DYNAMIC Wed May 1 19:11:28 UTC 2024"),
        ("kernel", KERN, INFO, "Command line: BOOT_IMAGE=(hd0,gpt2)/vmlinuz-5.14.0-427.13.1.el9_4.x86_64 root=/dev/mapper/rl-root ro crashkernel=1G-4G:192M,4G-64G:256M,64G-:512M"),
        ("kernel", KERN, INFO, "DMI: Lenovo ThinkSystem SD650 V3/SB27B89516, BIOS USE120P-2.10 01/15/2024"),
        ("kernel", KERN, INFO, "Memory: 263482744K/268011520K available (16384K kernel code, 5690K rwdata)"),
        ("kernel", KERN, INFO, "smpboot: Allowing 128 CPUs, 0 hotplug CPUs"),
        ("kernel", KERN, INFO, "mlx5_core 0000:3b:00.0: firmware version: 28.39.1002"),
        ("kernel", KERN, INFO, "EDAC MC0: Giving out device to module skx_edac controller Skylake Socket#0 IMC#0: DEV 0000:7e:0c.0 (INTERRUPT)"),
        ("systemd", DAEMON, INFO, "systemd 252-32.el9_4 running in system mode (+PAM +AUDIT +SELINUX -APPARMOR +IMA +SMACK +SECCOMP)"),
        ("systemd", DAEMON, INFO, "Detected architecture x86-64."),
        ("systemd", DAEMON, INFO, "Reached target Network is Online."),
        ("munged", DAEMON, INFO, "Munge daemon 0.5.13 starting"),
        ("kernel", KERN, INFO, "Lustre: Lustre: Build Version: 2.15.4"),
    ],
    "booted": [
        ("slurmd", DAEMON, INFO, "slurmd version 23.11.6 started"),
        ("slurmd", DAEMON, INFO, "slurmd started on {date}"),
        ("slurmd", DAEMON, INFO, "CPUs=128 Boards=1 Sockets=2 Cores=32 Threads=2 Memory=257425 TmpDisk=400000 Uptime={a} CPUSpecList=(null) FeaturesAvail=(null) FeaturesActive=(null)"),
    ],
}
