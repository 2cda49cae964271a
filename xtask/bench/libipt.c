/* The libipt side of `cargo xtask bench pt`: decode a raw PT trace with
 * libipt and print what was decoded and how long the decoding took, not
 * counting reading the files.
 *
 *   libipt packets TRACE             -> "PACKETS ERRORS NANOSECONDS"
 *   libipt flow TRACE CODE ADDRESS   -> "INSTRUCTIONS ERRORS NANOSECONDS"
 *   libipt ips TRACE CODE ADDRESS    -> each instruction's IP in hex, a line
 *                                       each, and "error" where decoding
 *                                       failed (`cargo xtask fuzz pt`)
 */
#include <intel-pt.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
}

static uint8_t *slurp(const char *path, size_t *size)
{
	FILE *file = fopen(path, "rb");
	uint8_t *buf;
	long end;

	if (!file || fseek(file, 0, SEEK_END) || (end = ftell(file)) < 0) {
		perror(path);
		exit(2);
	}
	rewind(file);
	buf = malloc(end ? (size_t) end : 1);
	if (!buf || fread(buf, 1, (size_t) end, file) != (size_t) end) {
		perror(path);
		exit(2);
	}
	fclose(file);
	*size = (size_t) end;
	return buf;
}

static void packets(struct pt_config *config)
{
	struct pt_packet_decoder *decoder = pt_pkt_alloc_decoder(config);
	struct pt_packet packet;
	uint64_t count = 0, errors = 0, start = now_ns();
	int status = pt_pkt_sync_forward(decoder);

	while (status >= 0) {
		status = pt_pkt_next(decoder, &packet, sizeof(packet));
		if (status >= 0) {
			count++;
			continue;
		}
		if (status == -pte_eos)
			break;
		errors++;
		status = pt_pkt_sync_forward(decoder);
	}
	printf("%" PRIu64 " %" PRIu64 " %" PRIu64 "\n", count, errors,
	       now_ns() - start);
	pt_pkt_free_decoder(decoder);
}

static void flow(struct pt_config *config, const char *code, uint64_t address,
		 int print)
{
	struct pt_insn_decoder *decoder = pt_insn_alloc_decoder(config);
	struct pt_insn insn;
	struct pt_event event;
	uint64_t count = 0, errors = 0, start;
	struct stat info;
	size_t size;
	int status;

	if (stat(code, &info)) {
		perror(code);
		exit(2);
	}
	size = (size_t) info.st_size;
	status = pt_image_add_file(pt_insn_get_image(decoder), code, 0, size,
				   NULL, address);
	if (status < 0) {
		fprintf(stderr, "%s: %s\n", code, pt_errstr(pt_errcode(status)));
		exit(2);
	}
	start = now_ns();
	for (;;) {
		status = pt_insn_sync_forward(decoder);
		if (status < 0)
			break;
		for (;;) {
			while (status & pts_event_pending) {
				status = pt_insn_event(decoder, &event, sizeof(event));
				if (status < 0)
					break;
			}
			if (status < 0)
				break;
			status = pt_insn_next(decoder, &insn, sizeof(insn));
			if (status < 0)
				break;
			if (print)
				printf("%" PRIx64 "\n", insn.ip);
			count++;
		}
		if (status == -pte_eos)
			break;
		if (print)
			printf("error\n");
		errors++;
	}
	if (!print)
		printf("%" PRIu64 " %" PRIu64 " %" PRIu64 "\n", count, errors,
		       now_ns() - start);
	pt_insn_free_decoder(decoder);
}

int main(int argc, char **argv)
{
	struct pt_config config;
	size_t size;
	uint8_t *trace;

	if (argc < 3 || (strcmp(argv[1], "packets") && argc < 5)) {
		fprintf(stderr, "usage: %s packets TRACE | flow|ips TRACE CODE ADDRESS\n", argv[0]);
		return 2;
	}
	trace = slurp(argv[2], &size);
	pt_config_init(&config);
	config.begin = trace;
	config.end = trace + size;
	if (!strcmp(argv[1], "packets"))
		packets(&config);
	else
		flow(&config, argv[3], strtoull(argv[4], NULL, 0),
		     !strcmp(argv[1], "ips"));
	free(trace);
	return 0;
}
