// CPU time of this process (getrusage) and of another one (/proc/PID/stat),
// in seconds, so that throughput can be given per core-second on a machine
// where the generator and the server share cores.
#pragma once

namespace shingled::load {

// User + system time of this process, all threads.
double self_cpu_seconds();

// User + system time of process `pid`, all threads; false when it cannot be
// read (no such process, no permission).
bool process_cpu_seconds(int pid, double& out);
// The same, user and system apart (where a server's time goes: its own code
// or the kernel's network stack).
bool process_cpu_seconds(int pid, double& user, double& system);

}  // namespace shingled::load
