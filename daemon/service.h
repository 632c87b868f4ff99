/*
 * Start-up and shutdown of the daemon process: settings, logging, the
 * loop, the server, and the service manager (through launch.h only).
 */
#pragma once

/* Run the daemon; returns the process exit status. */
int gr_service_main(int argc, char **argv);
