/* gpured: the reduction daemon. */
#include "daemon/service.h"

int main(int argc, char **argv)
{
	return gr_service_main(argc, argv);
}
