import sys

# The engine host is dispatched before the CLI is imported: a frozen bundle starts its own
# executable with this flag for every engine, and the CLI's imports would only slow that down.
if sys.argv[1:2] == ["--engine-host"]:
    from inglenook.engine.host import main
elif sys.argv[1:2] == ["--chat-template"]:  # the killable template renderer (engine host's)
    from inglenook.engine.template_process import main
elif sys.argv[1:2] == ["--pdf-text"]:  # the killable PDF reader (core/attachments_pdf.py)
    from inglenook.core.attachments_pdf import main as pdf_main

    raise SystemExit(pdf_main(sys.argv[2:]))
elif sys.argv[1:2] == ["--knowledge-convert"]:  # the killable converter (knowledge/)
    from inglenook.knowledge.convert_process import main as convert_main

    raise SystemExit(convert_main(sys.argv[2:]))
else:
    from inglenook.cli import main

raise SystemExit(main())
