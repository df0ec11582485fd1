"""What belongs to a person: their time zone and quiet hours, their allowance, and the
chats they know.
"""
